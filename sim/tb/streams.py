"""Stream drivers for cocotb testbenches: a source, a sink and a monitor for the ports of an
``amaranth.lib.stream`` interface, and the pause generators that put random gaps into them.

In the spirit of cocotbext-axi's ``define_stream``: one object per stream port, looked up once
(``<name>__valid``, ``<name>__ready`` and, where the stream has one, ``<name>__payload``), a
queue of whole payloads (one handle write per beat, whatever the payload's width) and a pause
generator (:func:`pauses`) for valid gaps on a source or back-pressure on a sink.

Timing. Every driver samples the handshake at the rising clock edge — what a cocotb trigger
reads there is the value the design registers on that edge, in Icarus and Verilator alike —
and writes its next ``valid`` / ``payload`` / ``ready`` right after it, where the write takes
effect after the edge as a register's would. So a driver costs one wake-up per cycle while a
transfer can happen, and none while it cannot:

* a :class:`StreamSource` with an empty queue waits on an event until :meth:`~StreamSource.send`;
* a :class:`StreamSink` or :class:`StreamMonitor` whose stream shows no ``valid`` waits for
  ``valid`` to rise (a value-change trigger, not a loop), and a sink's pause generator only
  advances in cycles where ``valid`` is up (so idle stretches cost nothing);
* :func:`wait_until` waits for a signal to take a value with a timeout in cycles, on
  value-change triggers; :func:`expect_steady` checks that signals keep a value for a number
  of cycles, woken only if one changes; :func:`wait_cycles` waits a number of cycles with one
  timer; :func:`watchdog` waits for a whole run and fails if it stops making progress, looking
  at the progress once per window of cycles.

Stream rules are checked on every stream a sink or monitor watches: once ``valid`` is up it
stays up, with the same payload, until the beat is taken (the check needs the payload read in
stalled cycles only); a sink's or monitor's ``check_rules`` turns it off while the design may
withdraw a beat on purpose.

Call the drivers' methods from a test coroutine outside the ReadOnly phase (cocotb refuses
writes there). Failure messages name the stream, the cycle, the seed and the simulator.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator

import cocotb
import numpy as np
from cocotb.triggers import (
    Event,
    FallingEdge,
    First,
    ReadOnly,
    RisingEdge,
    SimTimeoutError,
    Timer,
    ValueChange,
    with_timeout,
)
from cocotb.utils import get_sim_steps, get_sim_time

from sim.tb import tbutil

__all__ = ["pauses", "sim_cycles", "StreamSource", "StreamSink", "StreamMonitor",
           "wait_until", "expect_steady", "wait_cycles", "watchdog", "StreamError"]


class StreamError(AssertionError):
    """A stream rule was broken, or a wait timed out; the message says where."""


def sim_cycles() -> int:
    """Whole clock cycles of simulated time so far (the testbenches' clock period)."""
    return int(get_sim_time("ns")) // tbutil.CLOCK_PERIOD_NS


def pauses(rng: np.random.Generator, p: float, *, max_burst: int = 1) -> Iterator[int]:
    """An endless seeded pause pattern, 1 = pause this cycle, 0 = go: valid gaps on a source
    or back-pressure on a sink (what cocotbext-axi's ``set_pause_generator`` takes too).

    ``max_burst`` = 1: each cycle pauses with probability ``p``, one ``rng.random()`` draw a
    cycle. ``max_burst`` > 1: pauses come in bursts of 1..``max_burst`` cycles, with go-runs
    drawn so that about a fraction ``p`` of the cycles pause. ``p`` <= 0 never pauses and
    draws nothing; ``p`` >= 1 always pauses.
    """
    if p <= 0:
        while True:
            yield 0
    if max_burst <= 1:
        while True:
            yield int(rng.random() < p)
    while True:
        burst = int(rng.integers(1, max_burst + 1))
        # Go-runs geometric with a mean of burst * (1 - p) / p cycles.
        go = int(rng.geometric(min(1.0, p / (p + burst * (1 - p))))) - 1 if p < 1 else 0
        yield from [0] * go
        yield from [1] * burst


def _where(name: str) -> str:
    return f"cycle {sim_cycles()}, seed {tbutil.seed()}, {tbutil.simulator()}"


class _Stream:
    """The handles of one stream port ``name`` of ``dut``, looked up once."""

    def __init__(self, dut, name: str, clock=None):
        self.dut, self.name = dut, name
        self.clock = dut.clk if clock is None else clock
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        try:
            self.payload = getattr(dut, f"{name}__payload")
        except AttributeError:
            self.payload = None  # a stream without a payload (a bare handshake)
        self._edge = RisingEdge(self.clock)
        self.count = 0  # beats transferred so far
        self._got, self._until = Event(), 1

    def _counted(self) -> None:
        """After :attr:`count` has grown (at a beat's clock edge): wake :meth:`wait_count`."""
        if self.count >= self._until:
            self._got.set()

    def stop(self) -> None:
        """Stop driving or watching the stream for good (another driver may take it over)."""
        self._task.cancel()

    async def wait_count(self, count: int) -> None:
        """Until ``count`` beats have been transferred in all (:attr:`count`); returns at the
        clock edge of the last of them. One waiter at a time."""
        if self.count < count:
            self._until = count
            self._got.clear()
            await self._got.wait()


class StreamSource(_Stream):
    """Drives an input stream of the design from a queue of payloads (integers).

    ``pause``: a pause generator (:func:`pauses`), drawn once per cycle in which a beat is
    waiting but not yet shown; once shown, ``valid`` and the payload stay until the beat is
    taken. ``count`` is the number of beats taken so far (:meth:`wait_count` waits for a
    number of them); ``on_sent(payload)`` (optional) is called as each is taken, at its clock
    edge.
    """

    def __init__(self, dut, name: str, *, clock=None, pause: Iterator[int] | None = None,
                 on_sent: Callable[[int], None] | None = None):
        super().__init__(dut, name, clock)
        self.pause = pause
        self.on_sent = on_sent
        self._queue: deque[int] = deque()
        self._wake, self._idle = Event(), Event()
        self._idle.set()
        self.valid.value = 0
        self._valid_up = False
        self._step = Timer(1, "step")
        self._task = cocotb.start_soon(self._run())

    def set_pause_generator(self, pause: Iterator[int] | None) -> None:
        self.pause = pause

    def send(self, payloads: int | Iterable[int]) -> None:
        """Queue one payload or several; they go out in order."""
        if isinstance(payloads, int | np.integer):
            self._queue.append(int(payloads))
        else:
            self._queue.extend(int(p) for p in payloads)
        if self._queue:
            self._idle.clear()
            self._wake.set()

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing shown."""
        return self._idle.is_set()

    @property
    def pending(self) -> int:
        """Beats queued or shown, not yet taken."""
        return len(self._queue)

    async def wait(self) -> None:
        """Until every queued beat has been taken."""
        await self._idle.wait()

    def clear(self) -> None:
        """Drop every queued beat and lower ``valid`` now (for a reset in the middle)."""
        self._task.cancel()
        self._queue.clear()
        self.valid.value = 0
        self._valid_up = False
        self._idle.set()
        self._wake.clear()
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        queue, valid, ready, payload, edge = (self._queue, self.valid, self.ready, self.payload,
                                              self._edge)
        shown = False
        while True:
            if not shown:
                if not queue:
                    if self._valid_up:
                        valid.value = 0
                        self._valid_up = False
                    self._idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                    # send() may come in any phase, ReadOnly too (no writes there): one
                    # simulator step later is still before the next clock edge.
                    await self._step
                    continue
                if self.pause is not None and next(self.pause):
                    if self._valid_up:
                        valid.value = 0
                        self._valid_up = False
                    await edge
                    continue
                if payload is not None:
                    payload.value = queue[0]
                if not self._valid_up:
                    valid.value = 1
                    self._valid_up = True
                shown = True
            await edge
            if ready.value:
                beat = queue.popleft()
                self.count += 1
                shown = False
                if self.on_sent is not None:
                    self.on_sent(beat)
                self._counted()
            else:
                # Stalled: sleep until ready rises rather than waking every cycle.
                await ReadOnly()
                if not ready.value:
                    await RisingEdge(ready)


class _Watcher(_Stream):
    """What a sink and a monitor share: wait for ``valid`` without a loop, take beats at the
    clock edge, check the stream rule while stalled."""

    def __init__(self, dut, name, clock, on_beat):
        super().__init__(dut, name, clock)
        self.on_beat = on_beat
        self.queue: deque[int] = deque()
        #: Whether a stalled beat must keep ``valid`` and its payload until taken (else a
        #: :class:`StreamError`). Turn it off while the design may withdraw a beat on purpose
        #: (a soft reset that empties a queue, a watchdog that abandons a transfer): a beat
        #: withdrawn then is forgotten.
        self.check_rules = True

    def _take(self, value: int) -> None:
        self.count += 1
        if self.on_beat is not None:
            self.on_beat(value)
        else:
            self.queue.append(value)
        self._counted()

    async def _valid_rises(self) -> None:
        """After an edge at which ``valid`` was low: return, in a phase that may write, once
        it is up (before the clock edge that can take the beat)."""
        await ReadOnly()  # the values settled after the edge: valid may be up already
        if self.valid.value.is_resolvable and int(self.valid.value):
            await FallingEdge(self.clock)  # half a cycle before that edge, writes allowed
        else:
            await RisingEdge(self.valid)

    async def recv(self) -> int:
        """The next beat's payload (sinks and monitors without ``on_beat``)."""
        if not self.queue:
            await self.wait_count(self.count + 1)
        return self.queue.popleft()

    def clear(self) -> None:
        """Forget queued beats and a stalled one (for a reset in the middle)."""
        self._task.cancel()
        self.queue.clear()
        self._task = cocotb.start_soon(self._run())

    async def _watch(self, taken: Callable[[], bool],
                     before_edge: Callable[[], None] | None = None) -> None:
        """The loop a sink and a monitor share: at each clock edge at which ``valid`` is up,
        the beat is taken if ``taken()`` (the ready the sink drove, the ready the monitor
        sampled), else held for the stream rule; ``before_edge()`` runs before each edge
        awaited while ``valid`` is up (the sink's back-pressure)."""
        valid, payload, edge = self.valid, self.payload, self._edge
        held = None  # the payload of a beat shown but not taken at the last edge
        await self._valid_rises()
        while True:
            if before_edge is not None:
                before_edge()
            await edge
            if valid.value:
                value = int(payload.value) if payload is not None else 0
                if held is not None and value != held and self.check_rules:
                    raise self._broken(f"payload changed from {held:#x} to {value:#x} while "
                                       "stalled")
                if taken():
                    held = None
                    self._take(value)
                else:
                    held = value
                continue
            if held is not None and self.check_rules:
                raise self._broken("valid dropped while stalled")
            held = None
            await self._valid_rises()

    def _broken(self, what: str) -> StreamError:
        return StreamError(f"{self.name}: {what} ({_where(self.name)})")


class StreamSink(_Watcher):
    """Takes the beats of an output stream of the design; drives its ``ready``.

    ``pause``: a pause generator for back-pressure, drawn once per cycle in which ``valid`` is
    up (``ready`` keeps its last value while the stream is idle); None: always ready. Each
    beat's payload goes to ``on_beat(payload)`` if given (called at the beat's clock edge),
    else to :attr:`queue` (:meth:`recv`). Checks that a stalled beat keeps ``valid`` and its
    payload until taken (while :attr:`check_rules` is on).
    """

    def __init__(self, dut, name: str, *, clock=None, pause: Iterator[int] | None = None,
                 on_beat: Callable[[int], None] | None = None):
        super().__init__(dut, name, clock, on_beat)
        self.pause = pause
        self.ready.value = 0 if pause is not None else 1
        self._ready = pause is None
        self._task = cocotb.start_soon(self._run())

    def set_pause_generator(self, pause: Iterator[int] | None) -> None:
        self.pause = pause
        if pause is None:
            self.ready.value = 1
            self._ready = True

    def _drive_ready(self) -> None:
        if self.pause is not None:
            go = not next(self.pause)
            if go != self._ready:
                self.ready.value = int(go)
                self._ready = go

    def _run(self):
        return self._watch(lambda: self._ready, self._drive_ready)


class StreamMonitor(_Watcher):
    """Watches a stream without driving it: every beat (``valid`` and ``ready`` at a clock
    edge) goes to ``on_beat(payload)`` or :attr:`queue`; the stream rule is checked (while
    :attr:`check_rules` is on)."""

    def __init__(self, dut, name: str, *, clock=None,
                 on_beat: Callable[[int], None] | None = None):
        super().__init__(dut, name, clock, on_beat)
        self._task = cocotb.start_soon(self._run())

    def _run(self):
        return self._watch(lambda: bool(self.ready.value))


async def wait_until(signal, value: int, *, clock, timeout_cycles: int, what: str) -> int:
    """Return at the first clock edge at which ``signal`` (as registered there) equals
    ``value``, waiting on its value changes, not cycle by cycle; returns that cycle
    (:func:`sim_cycles`). Raises :class:`StreamError` naming ``what`` after
    ``timeout_cycles`` cycles."""
    edge = RisingEdge(clock)
    deadline = sim_cycles() + timeout_cycles
    while True:
        await ReadOnly()
        if signal.value.is_resolvable and int(signal.value) == value:
            await edge
            if signal.value.is_resolvable and int(signal.value) == value:
                return sim_cycles()
            continue
        left = deadline - sim_cycles()
        try:
            if left <= 0:
                raise SimTimeoutError
            await with_timeout(ValueChange(signal), left * tbutil.CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError as exc:
            raise StreamError(f"{what}: not {value} within {timeout_cycles} cycles "
                              f"({_where(what)})") from exc


def _name(handle) -> str:
    return handle._name if hasattr(handle, "_name") else str(handle)


async def expect_steady(signals: Iterable, value: int, *, cycles: int, what: str) -> None:
    """Check that every one of ``signals`` (handles) holds ``value`` from now for ``cycles``
    clock cycles: after a reset, say, that no ``valid`` or ``busy`` comes up. Checked whenever
    one of them changes (its value once the time step has settled, so a delta-cycle glitch is
    no failure), not cycle by cycle: a steady signal costs no wake-up. An unresolvable value
    (X, Z) fails too. Raises :class:`StreamError` naming the signal and ``what``. Call it
    outside the ReadOnly phase; it returns outside it too."""
    handles = list(signals)
    end = get_sim_time("step") + get_sim_steps(cycles * tbutil.CLOCK_PERIOD_NS, "ns")
    while True:
        await ReadOnly()
        for h in handles:
            v = h.value
            if not v.is_resolvable or int(v) != value:
                raise StreamError(f"{_name(h)} is {v}, not {value}, {what} ({_where(what)})")
        left = end - get_sim_time("step")
        if left <= 0:
            await Timer(1, "step")  # out of the ReadOnly phase (the caller may write)
            return
        try:
            await with_timeout(First(*(ValueChange(h) for h in handles)), left, "step")
        except SimTimeoutError:
            return


async def wait_cycles(cycles: int, *, clock) -> None:
    """Return at the ``cycles``-th rising edge of ``clock`` after the current cycle's, like
    ``ClockCycles(clock, cycles)`` called at or after that edge, with one timer and one edge
    wake-up instead of one a cycle (for the testbenches' clock: period
    ``tbutil.CLOCK_PERIOD_NS``, rising at multiples of it)."""
    if cycles <= 0:
        return
    period = tbutil.CLOCK_PERIOD_NS
    # Half a period before the edge wanted, then that edge.
    left = (get_sim_steps((sim_cycles() + cycles) * period - period // 2, "ns")
            - get_sim_time("step"))
    if left > 0:
        await Timer(left, "step")
    await RisingEdge(clock)


async def watchdog(wait: Callable[[], Awaitable], progress: Callable[[], object], *,
                   quiet_cycles: int, what: Callable[[], str]) -> None:
    """Await ``wait()`` (a fresh awaitable per call, e.g. ``lambda: sink.wait_count(n)``),
    failing if ``progress()`` (e.g. the beats moved so far) stays the same for a whole window
    of ``quiet_cycles`` cycles: a hang is reported after ``quiet_cycles`` to twice that many
    cycles without progress. Looks at the progress once per window, not every cycle; on
    timeout ``wait()``'s coroutine is killed and called again for the next window. Raises
    :class:`StreamError` with ``what()`` (the state, for the message)."""
    last = progress()
    while True:
        try:
            await with_timeout(wait(), quiet_cycles * tbutil.CLOCK_PERIOD_NS, "ns")
            return
        except SimTimeoutError:
            now = progress()
            if now == last:
                raise StreamError(f"{what()}: no progress in {quiet_cycles} cycles "
                                  f"({_where('')})") from None
            last = now
