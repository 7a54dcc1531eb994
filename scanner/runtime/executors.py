"""Two parts of a job on two cores: one in a forked child, one here.

A scan is CPU-bound Python; the second core of a CI runner or a laptop is idle. A
forked child shares everything already built (rules, compiled programs, the model)
without pickling it, computes its part (the second part of the files to load, every
other chunk of subjects to evaluate) and sends only the result back, pickled
through a pipe. Only while this process is small (``FORK_BELOW``): the child's
copied pages are memory too. A run expected to grow past that (a large audit) starts
a ``Helper`` instead, forked before the large data exists, and pickles its part to
it; the runtime keeps the helper for the run (``helper_process``), and the work that
can use it asks for it (``helper``): it is nobody's parameter. Anything that goes
wrong on either path (no ``fork`` on the platform, a child that crashes or raises, a
result that does not pickle) only costs time: the child's part is then computed
here, so the answer never depends on whether the child worked. ``POOLGATE_JOBS=1``
keeps everything in one process.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Final, Generic, Protocol, TypeVar

from scanner.runtime.teardown import flush_output

T = TypeVar("T")

_FAILED: Final = b""


def cpus() -> int:
    """CPUs this process may use (``POOLGATE_JOBS`` overrides): those it may run on,
    no more than a container's CPU limit allows in whole CPUs (a pod with
    ``limits.cpu: 1`` on a 64-CPU node gets 1, and no second process that would
    only cost memory)."""
    configured = os.environ.get("POOLGATE_JOBS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    limit = cpu_limit()
    return usable if limit is None else max(1, min(usable, int(limit)))


CGROUP_V2_MAX: Final = "/sys/fs/cgroup/cpu.max"
CGROUP_V1_QUOTA: Final = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"
CGROUP_V1_PERIOD: Final = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"


def cpu_limit() -> float | None:
    """The CPUs the cgroup this process sees (a container's) may use, as its CPU
    quota over its period (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), or None
    when there is no limit or nothing says."""
    try:
        with open(CGROUP_V2_MAX, encoding="ascii") as limit:
            quota, _, period = limit.read().strip().partition(" ")
    except OSError:
        try:
            with open(CGROUP_V1_QUOTA, encoding="ascii") as limit:
                quota = limit.read().strip()
            with open(CGROUP_V1_PERIOD, encoding="ascii") as length:
                period = length.read().strip()
        except OSError:
            return None
    try:
        allowed, every = int(quota), int(period)
    except ValueError:  # "max": no limit
        return None
    return allowed / every if allowed > 0 and every > 0 else None


FORK_BELOW: Final = 1024 * 1024 * 1024
"""No second process once this one holds this much memory. The child shares every
page at first, but each object it reads gets its page copied (reference counts are
written), so a child evaluating half of a 100,000-pod audit added ~0.7 GiB to a
1.4 GiB process: over the 2 GB budget, for 15% of the time."""


def available() -> bool:
    """Whether a second process is worth starting: fork (Linux), a second CPU, and
    this process still under ``FORK_BELOW``."""
    return sys.platform == "linux" and cpus() >= 2 and resident_bytes() < FORK_BELOW


def resident_bytes() -> int:
    """This process's resident memory now (0 where /proc does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def in_two(here: Callable[[], T], there: Callable[[], T]) -> tuple[T, T]:
    """``(here(), there())``, with ``there`` run in a forked child when possible."""
    if not available():
        return here(), there()
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        try:
            payload = pickle.dumps(there(), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # any failure: the parent computes it again
            payload = _FAILED
        send.send_bytes(payload)
        send.close()

    flush_output()  # the child must not write a copy of what is buffered
    process = context.Process(target=child, daemon=True)
    try:
        process.start()
    except OSError:
        receive.close()
        send.close()
        return here(), there()
    send.close()
    try:
        mine = here()
    except BaseException:
        process.terminate()  # it may be blocked sending to a reader that is gone
        process.join()
        receive.close()
        raise
    try:
        payload = receive.recv_bytes()
    except (EOFError, OSError):
        payload = _FAILED  # the child died before it could answer
    finally:
        receive.close()
        process.join()
    if payload == _FAILED:
        return mine, there()
    try:
        theirs: T = pickle.loads(payload)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        return mine, there()
    return mine, theirs


C = TypeVar("C")
T_co = TypeVar("T_co", covariant=True)


class Waiting(Protocol[T_co]):
    """Waits for a helper's answer (``Helper.submit``)."""

    def __call__(self, timeout: float | None = None) -> T_co | None: ...


def _no_answer(timeout: float | None = None) -> None:
    return None


class Helper(Generic[C]):
    """A second process forked while this one is still small, that takes work later.

    ``in_two`` forks once the work is known and shares everything built by then;
    past ``FORK_BELOW`` that sharing costs memory, since every page either process
    writes afterwards is copied. A helper is forked early instead, before the large
    data exists (an audit starts one after loading its rules, before reading the
    cluster): it holds only its own small copy of the process, and the work it gets
    later is pickled to it through a pipe, so it holds only that part too.

    Work is a module-level function (pickled by name), called in the helper with the
    helper's copy of ``context`` (what existed at the fork: rules, the CEL engine)
    and the arguments sent. Anything that goes wrong (no fork, a helper that died or
    raised, an answer that does not unpickle) makes ``submit``'s waiting function
    return None, and the caller does the work itself.
    """

    def __init__(self, process: Any, requests: Any, answers: Any) -> None:
        self._process = process
        self._requests = requests
        self._answers = answers
        self._pending = False
        """Work was sent and its answer not read (the caller stopped waiting)."""

    @classmethod
    def start(cls, context: C) -> Helper[C] | None:
        """A helper holding ``context``, or None where there is no fork or second CPU."""
        if sys.platform != "linux" or cpus() < 2:
            return None
        import multiprocessing

        multiprocessing_context = multiprocessing.get_context("fork")
        request_reader, request_writer = multiprocessing_context.Pipe(duplex=False)
        answer_reader, answer_writer = multiprocessing_context.Pipe(duplex=False)
        flush_output()
        process = multiprocessing_context.Process(
            target=_serve,
            args=(context, request_reader, answer_writer, (request_writer, answer_reader)),
            daemon=True,
        )
        try:
            process.start()
        except OSError:
            for end in (request_reader, request_writer, answer_reader, answer_writer):
                end.close()
            return None
        request_reader.close()
        answer_writer.close()
        return cls(process, request_writer, answer_reader)

    def submit(self, function: Callable[..., T], *args: Any) -> Waiting[T]:
        """Send ``function(context, *args)`` to the helper; the returned function waits
        for its answer, at most the seconds it is given (None: as long as it takes),
        and returns None if the helper failed or did not answer in time (``close``
        then stops it). One piece of work at a time."""
        try:
            self._requests.send_bytes(
                pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL)
            )
        except (OSError, ValueError, pickle.PicklingError, TypeError, AttributeError):
            return _no_answer
        self._pending = True

        def wait(timeout: float | None = None) -> T | None:
            try:
                if timeout is not None and not self._answers.poll(timeout):
                    return None  # still pending: close() stops it
            except (EOFError, OSError):
                self._pending = False
                return None
            try:
                payload = self._answers.recv_bytes()
            except (EOFError, OSError):
                return None  # the helper died before it could answer
            finally:
                self._pending = False
            if payload == _FAILED:
                return None
            try:
                answer: T = pickle.loads(payload)
            except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
                return None
            return answer

        return wait

    def close(self) -> None:
        """Stop the helper: it exits when its request pipe closes, or at once while it
        still works on something nobody waits for (the caller failed or was
        interrupted)."""
        if self._pending:
            self._process.terminate()
        with suppress(OSError):
            self._requests.close()
        self._process.join(timeout=5)
        if self._process.is_alive():  # pragma: no cover - stuck sending to nobody
            self._process.terminate()
            self._process.join()
        with suppress(OSError):
            self._answers.close()


def _serve(context: Any, requests: Any, answers: Any, parents: tuple[Any, ...]) -> None:
    """The helper's loop: one answer per request, until the request pipe closes.
    The parent's ends of the pipes are closed first (the request pipe would never
    close while the helper holds its writing end too). Ctrl-C is the parent's to
    handle (it stops the helper); here it would only print a traceback from the
    middle of a piece of work."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for end in parents:
        end.close()
    while True:
        try:
            request = requests.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            function, args = pickle.loads(request)
            payload = pickle.dumps(function(context, *args), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # any failure: the caller does the work itself
            payload = _FAILED
        try:
            answers.send_bytes(payload)
        except OSError:
            return


_helper: Helper[Any] | None = None


@contextmanager
def helper_process(context: object) -> Iterator[Helper[Any] | None]:
    """A ``Helper`` holding ``context``, started now and stopped when the block ends;
    inside the block it is the one ``helper()`` gives to whoever has work for it (the
    evaluation: scanner/evaluate/shipping.py)."""
    global _helper
    started = Helper.start(context)
    previous, _helper = _helper, started
    try:
        yield started
    finally:
        _helper = previous
        if started is not None:
            started.close()


def helper() -> Helper[Any] | None:
    """The helper process of the ``helper_process`` block this process is in, if any."""
    return _helper


HELPER_ROOM: Final = 1_600 * 1024 * 1024
"""Both processes together stay under this, by estimate: the helper gets only as much
work as fits beside what this process already holds. The documented footprint of a
100,000-pod audit is 2 GB, and a CronJob's memory limit is set by it. Where every one
of 100,000 pods is its own workload (1.6 GiB in one process), the helper gets ~20,000
of them instead of half, and both hold ~1.7 GiB."""

_HELPER_BASE: Final = 64 * 1024 * 1024
"""The helper's own pages (the process at the fork, rules and engine), roughly."""

_HELPER_EXPANSION: Final = 8
"""Bytes the helper holds per byte of pickled work: the objects, their evaluation
and its results (measured 6-7.5 on the benchmark snapshots)."""


def helper_room(sample: Sequence[object]) -> int:
    """How many items like ``sample`` fit in the helper under ``HELPER_ROOM``, from
    their pickled size."""
    room = HELPER_ROOM - resident_bytes() - _HELPER_BASE
    if room <= 0 or not sample:
        return 0
    size = len(pickle.dumps(list(sample), protocol=pickle.HIGHEST_PROTOCOL)) / len(sample)
    return int(room / (size * _HELPER_EXPANSION))
