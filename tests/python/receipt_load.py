"""Receipt load for the operations tests (backup under load, rolling upgrade):
threads marking messages read, member by member, forward in each channel,
keeping every acknowledged mark."""

import threading
import time


class Ack:
    """One acknowledged mark: when its answer came (monotonic), what it marked, and what `mark` returned."""

    __slots__ = ("at", "cid", "user", "index", "tag")

    def __init__(self, at, cid, user, index, tag):
        self.at, self.cid, self.user, self.index, self.tag = at, cid, user, index, tag


class MarkLoad:
    """`threads` threads share the (channel, member) pairs; each marks its pairs'
    next message read in turn, until every message of `order` is read or the
    load stops. `mark(cid, user, message_id)` makes the call (its result is the
    ack's tag), `after_mark(step, thread, cid)`, if given, runs after each one.
    Both are called from the load's threads."""

    def __init__(self, mark, order, members, threads=3, after_mark=None, pause=0.0):
        self.mark = mark
        self.order = order
        self.after_mark = after_mark
        self.pause = pause
        self.acked = []
        self.errors = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        pairs = [(cid, user) for cid in order for user in members]
        self.threads = [threading.Thread(target=self.run, args=(pairs[n::threads], n), daemon=True)
                        for n in range(threads)]

    def run(self, pairs, thread):
        position = {pair: 0 for pair in pairs}
        step = 0
        try:
            while not self.stop.is_set():
                for cid, user in pairs:
                    index = position[(cid, user)]
                    if index >= len(self.order[cid]) or self.stop.is_set():
                        continue
                    tag = self.mark(cid, user, self.order[cid][index])
                    with self.lock:
                        self.acked.append(Ack(time.monotonic(), cid, user, index, tag))
                    position[(cid, user)] = index + 1
                    step += 1
                    if self.after_mark:
                        self.after_mark(step, thread, cid)
                if self.pause:
                    time.sleep(self.pause)
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.errors.append(error)

    def acks(self):
        with self.lock:
            return list(self.acked)

    def count(self, tag=None):
        return sum(1 for ack in self.acks() if tag is None or ack.tag == tag)

    def wait_for(self, more, tag=None, after=None, timeout=120):
        """Until `more` further marks (tagged `tag`, answered after monotonic time `after`) are acknowledged."""
        def counted():
            return sum(1 for ack in self.acks() if (tag is None or ack.tag == tag) and (after is None or ack.at > after))
        target = (0 if after is not None else counted()) + more
        deadline = time.monotonic() + timeout
        while counted() < target:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"the load made only {counted()} of {target} marks"
            time.sleep(0.01)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)
