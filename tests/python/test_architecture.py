"""The server's folders depend on each other one way (docs/architecture.md):
`scripts/folder-arrows --check` holds the code to it, and fails when a file
names a type of a folder above its own or a folder is in no layer."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "folder-arrows")
SOURCES = os.path.join(ROOT, "Sources", "TicksServer")


def check(root=None):
    args = [sys.executable, SCRIPT, "--brief", "--check"] + (["--root", str(root)] if root else [])
    return subprocess.run(args, capture_output=True, text=True)


def test_the_folders_depend_one_way():
    result = check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 pairs of folders use each other" in result.stdout


def test_an_arrow_up_the_layers_fails(tmp_path):
    copy = tmp_path / "TicksServer"
    shutil.copytree(SOURCES, copy)
    # A store that wakes the webhook sender itself: Stores -> Webhooks goes up.
    (copy / "Stores" / "Upward.swift").write_text("func upward(_ sender: WebhookSender) {}\n")
    result = check(copy)
    assert result.returncode == 1
    assert "goes up: Stores -> Webhooks (WebhookSender)" in result.stdout


def test_a_folder_in_no_layer_fails(tmp_path):
    copy = tmp_path / "TicksServer"
    shutil.copytree(SOURCES, copy)
    (copy / "Elsewhere").mkdir()
    (copy / "Elsewhere" / "Thing.swift").write_text("struct Thing {}\n")
    result = check(copy)
    assert result.returncode == 1
    assert "in no layer: Elsewhere" in result.stdout


def test_a_call_of_a_free_function_up_the_layers_fails(tmp_path):
    copy = tmp_path / "TicksServer"
    shutil.copytree(SOURCES, copy)
    # A request-pipeline check calling a controller's free function: HTTP -> Controllers goes up,
    # though the call names no type (`requireValidID` hid two such arrows until 2026-11-29).
    (copy / "Controllers" / "Check.swift").write_text("func checkSomething(_ text: String) throws {}\n")
    (copy / "HTTP" / "Caller.swift").write_text("func caller() throws { try checkSomething(\"x\") }\n")
    result = check(copy)
    assert result.returncode == 1
    assert "goes up: HTTP -> Controllers (checkSomething())" in result.stdout
