"""ticks-bench's scenarios, each once at a tiny size against a fresh
server: proof that the load generator still works, not a measurement."""

import json
import os
import subprocess
import urllib.request

import pytest
from conftest import TicksProcess

BENCH_BIN = os.environ.get("TICKS_BENCH_BIN", os.path.join(os.getcwd(), ".build", "debug", "ticks-bench"))


@pytest.fixture
def server(tmp_path):
    process = TicksProcess(tmp_path / "bench")
    yield process
    assert process.stop() == 0, process.output()


# Above every wait inside a scenario (sdk-cache waits up to 300 s for a catch-up), so a run that
# is slow ends with the scenario's own report of what was missing, not killed without one.
BENCH_TIMEOUT = 600


def bench(server, *arguments):
    try:
        result = subprocess.run(
            [BENCH_BIN, *arguments, "--json", "--url", server.base_url, "--data-dir", server.data_dir],
            capture_output=True, text=True, timeout=BENCH_TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        # What it had said so far (each scenario reports its progress on stderr; bytes, whatever `text` says).
        said = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr
        pytest.fail(f"ticks-bench {arguments[0]} ran over {BENCH_TIMEOUT} s; its progress:\n{said}")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_receipts_every_mark_reaches_the_sender(server):
    result = bench(server, "receipts", "--channels", "4", "--members", "3", "--rate", "40", "--duration", "1")
    assert result["scenario"] == "receipts"
    assert result["errors"] == 0 and result["missing"] == 0
    # 4 channels of one sender and two readers; 40 marks, each seen once by its sender.
    assert result["latency_ms"]["count"] == 40
    assert 0 < result["latency_ms"]["p50"] <= result["latency_ms"]["p99"] <= result["latency_ms"]["max"]
    assert result["achieved_rate"] > 20
    # The server's CPU over the load, from its /metrics, per receipt answered: some, and not absurd.
    assert 0 < result["server_cpu_us_per_receipt"] < 1_000_000


def test_receipts_over_the_socket_reach_the_sender_without_http(server):
    result = bench(server, "receipts", "--channels", "4", "--members", "3", "--rate", "40", "--duration", "1",
                   "--via", "socket")
    assert result["params"]["via"] == "socket"
    assert result["errors"] == 0 and result["missing"] == 0
    assert result["latency_ms"]["count"] == 40
    metrics = urllib.request.urlopen(server.base_url + "/metrics", timeout=10).read().decode()
    sent = sum(float(line.split()[-1]) for line in metrics.splitlines()
               if line.startswith("ticks_socket_receipts_total") and 'outcome="ok"' in line)
    assert sent == 40, metrics
    assert 'route="/channels/{type}/{id}/read"' not in metrics


def test_pings_each_frame_is_answered(server):
    result = bench(server, "pings", "--sockets", "4", "--rate", "40", "--duration", "1")
    assert result["scenario"] == "pings"
    assert result["errors"] == 0
    # 40 health.check frames, each answered before its socket sends the next.
    assert result["latency_ms"]["count"] == 40
    assert result["achieved_rate"] > 20
    assert 0 < result["server_cpu_us_per_frame"] < 1_000_000


def test_receipts_sweep_reports_each_rate(server):
    result = bench(server, "receipts", "--channels", "2", "--rate", "10,20", "--duration", "1", "--kinds", "read")
    assert [run["params"]["rate"] for run in result["runs"]] == [10, 20]
    assert all(run["missing"] == 0 and run["errors"] == 0 for run in result["runs"])


def test_group_sender_sees_every_read_with_frames_linear_in_members(server):
    result = bench(server, "group", "--members", "30")
    assert result["errors"] == 0
    assert result["time_to_read_count_ms"] > 0
    assert result["latency_ms"]["count"] == 29
    # Each read reaches every member in a channel this small: 29 × 30 read events,
    # 29 own notifications and the message itself.
    assert result["frames_sent"] >= 29 * 30


def test_connections_are_all_counted(server):
    result = bench(server, "connections", "--count", "50")
    assert result["errors"] == 0
    assert result["connect_rate"] > 0
    assert result["server_rss_after_bytes"] > 0 and result["generator_rss_bytes"] > 0


def test_storage_grows_with_messages_and_moves(server):
    result = bench(server, "storage", "--messages", "200", "--channels", "4")
    assert result["params"]["messages"] == 200
    # Nothing was marked delivered first, so each mark read moves both cursors (R1).
    assert result["cursor_moves"] == 400
    assert result["bytes_per_message"] > 0 and result["bytes_per_cursor_move"] > 0


def test_sdk_cache_opens_offline_and_catches_up(server):
    result = bench(server, "sdk-cache", "--channels", "12", "--missed-events", "60", "--affected-channels", "4",
                   "--runs", "1", "--open-runs", "2", "--page-size", "5", "--gap", "0")
    assert result["scenario"] == "sdk-cache"
    # Offline: every cached channel shows, from the cache alone.
    assert [run["channels_shown"] for run in result["open_runs"]] == [12, 12]
    assert 0 < result["open_total_ms"]["median"] <= result["open_total_ms"]["max"]
    assert result["warm_pages"] == 3 and result["cache_file_bytes"] > 0
    # Online again: the 60 missed messages arrive through POST /sync.
    [run] = result["sync_runs"]
    assert run["missed_events"] == 60 and run["affected_channels"] == 4
    assert run["missing"] == 0 and run["caught_up_ms"] > 0
    assert run["sync_calls"] >= 1


def run_prune(tmp_path, *arguments):
    """`ticks-bench prune` works in process on files of its own (no server)."""
    result = subprocess.run([BENCH_BIN, "prune", "--data-dir", str(tmp_path), "--json", *arguments],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_prune_deletes_the_moves_older_than_the_window_in_small_batches(tmp_path):
    result = run_prune(tmp_path, "--moves", "3650", "--days", "365", "--channels", "5", "--rate", "50",
                       "--duration", "1", "--runs", "1")
    run = result["runs"][0]
    # 3,650 moves evenly over 365 days (10 a day), plus the channels' own; 90 days kept.
    assert 2740 <= run["deleted"] <= 2790, run
    # What is left: the window's moves and those the receipts logged during the run (one or two each).
    receipts = run["receipts_without_pruning"]["count"] + run["receipts_while_pruning"]["count"]
    kept = run["moves_before"] - run["deleted"]
    assert kept + receipts <= run["moves_after"] <= kept + 2 * receipts, run
    assert run["batches"] > run["deleted"] / 1000  # sized batches start at 50 ids
    assert run["receipt_errors"] == 0
    assert run["file_bytes_after_vacuum"] < run["file_bytes_before"]


def test_prune_steady_state_keeps_the_log_at_a_window_of_moves(tmp_path):
    result = run_prune(tmp_path, "--steady", "8", "--retention", "2s", "--interval", "1", "--channels", "5",
                       "--rate", "50")
    samples = result["samples"]
    assert len(samples) >= 8 and result["receipt_errors"] == 0
    # 50 receipts/s for 8 s logged a move each (about 400); a 2 s window and 1 s rounds keep well under
    # half of them (three quarters allows for rounds late on a busy machine; without pruning: all).
    assert samples[-1]["moves"] < 0.75 * result["receipts"]["count"], samples
