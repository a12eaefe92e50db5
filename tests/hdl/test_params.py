"""The parameter checks: ``hdl.params`` itself, and every Raises line of every component.

Construction only, no simulation: each component checks its parameters in its constructor.
"""

import gc
import re
import warnings

import pytest
from amaranth.hdl._ir import UnusedElaboratable

from hdl.activation import ActivationEngine
from hdl.activity import ActivityRecorder
from hdl.axi_mem import AxiMemory
from hdl.axil_decoder import AxiLiteDecoder
from hdl.board import BoardTop
from hdl.cmdqueue import CommandQueue
from hdl.collective import MAX_WATCHDOG_CYCLES, CollectiveEngine
from hdl.core import NeuronCore
from hdl.dma import DmaEngine
from hdl.fp32_add import FP32_ADD_MAX_STAGES, Fp32Adder
from hdl.fp32_compare import Fp32Compare
from hdl.fp32_mul import FP32_MUL_MAX_STAGES, Fp32Multiplier
from hdl.fp32_widen import Fp32Widen
from hdl.fp_mul import FP_MUL_MAX_CUTS, FpMultiplier, FpProduct, OperandDecoder
from hdl.instances import ModuleInstance
from hdl.multicore import CoreRing
from hdl.params import check_int, check_one_of, check_power_of_two
from hdl.pe import PE, PEColumn
from hdl.read_port import ReadBuffer
from hdl.register_player import RegisterPlayer
from hdl.ring import CollectiveRing, LinkModel
from hdl.sequencer import Sequencer
from hdl.sim_batch import BeatPlayer, BeatRecorder, CycleReplay, PlayedStreams, PulseCounter
from hdl.sim_top import AxiStalls, CoreWithDram, RingWithDram
from hdl.sru import SRU_MAX_STAGES, StochasticRounder
from hdl.systolic import SystolicArray
from hdl.tensor_engine import TensorEngine
from hdl.torus import CollectiveTorus, TorusNode
from hdl.uart import UartRx, UartTx
from hdl.uart_bridge import UartAxiLiteBridge
from hdl.xorwow import XorwowSeeder

# A constructor that fails after building its sub-components leaves them unelaborated.
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl._ir.UnusedElaboratable")


@pytest.fixture(autouse=True, scope="module")
def _collect_unelaborated():
    """Collect them here, not during some later test that would show the warnings."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        gc.collect()

T, V = TypeError, ValueError

# --- the helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, what", [
    ({"lo": 1, "hi": 256}, "an integer between 1 and 256"),
    ({"lo": 1}, "a positive integer"),
    ({"lo": 0}, "a non-negative integer"),
    ({"lo": 4}, "an integer >= 4"),
    ({"hi": 5}, "an integer <= 5"),
    ({}, "an integer"),
    ({"lo": 0, "hi": 0}, "0"),
    ({"lo": 16, "hi": 64, "also": (0,)}, "0 or an integer between 16 and 64"),
    ({"lo": 16, "hi": 64, "also": (0, 1)}, "0, 1 or an integer between 16 and 64"),
])
@pytest.mark.parametrize("value", ["3", 3.0, True, None, [3]])
def test_check_int_wrong_type(kwargs, what, value):
    with pytest.raises(TypeError, match=f"^x must be {re.escape(what)}, not "
                                        f"{re.escape(repr(value))}$"):
        check_int("x", value, **kwargs)


@pytest.mark.parametrize("kwargs, value, message", [
    ({"lo": 1, "hi": 256}, 0, "lanes must be an integer between 1 and 256, not 0"),
    ({"lo": 1, "hi": 256}, 257, "lanes must be an integer between 1 and 256, not 257"),
    ({"lo": 1}, 0, "lanes must be a positive integer, not 0"),
    ({"lo": 0}, -1, "lanes must be a non-negative integer, not -1"),
    ({"lo": 4}, 3, "lanes must be an integer >= 4, not 3"),
    ({"hi": 5}, 6, "lanes must be an integer <= 5, not 6"),
    ({"lo": 0, "hi": 0, "note": "here"}, 2, "lanes must be 0 here, not 2"),
    ({"lo": 16, "hi": 64, "also": (0,), "note": "(0: off)"}, 1,
     "lanes must be 0 or an integer between 16 and 64 (0: off), not 1"),
])
def test_check_int_wrong_value(kwargs, value, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_int("lanes", value, **kwargs)


@pytest.mark.parametrize("kwargs, value", [
    ({"lo": 1, "hi": 256}, 1), ({"lo": 1, "hi": 256}, 256), ({"lo": 1}, 1 << 80),
    ({"hi": 5}, -10), ({}, 0), ({"lo": 16, "hi": 64, "also": (0,)}, 0),
    ({"lo": 16, "hi": 64, "also": (0,)}, 16), ({"lo": 0, "hi": 0}, 0),
])
def test_check_int_returns_legal_values(kwargs, value):
    assert check_int("x", value, **kwargs) == value


def test_check_one_of():
    assert check_one_of("link_width", 4, (1, 2, 4)) == 4
    with pytest.raises(ValueError, match=r"^link_width must be one of \(1, 2, 4\) \(fp32 words "
                                         r"per beat\), not 3$"):
        check_one_of("link_width", 3, (1, 2, 4), note="(fp32 words per beat)")
    for value in (2.0, True, "2", None):
        with pytest.raises(TypeError, match=r"^link_width must be one of \(1, 2, 4\), not "):
            check_one_of("link_width", value, (1, 2, 4))


def test_check_power_of_two():
    for v in (1, 2, 1 << 40):
        assert check_power_of_two("size", v) == v
    assert check_power_of_two("size", 4, lo=4, hi=4) == 4
    for v in (0, -4, 3, 3000):
        with pytest.raises(ValueError, match=rf"^size must be a power of two, not {v}$"):
            check_power_of_two("size", v)
    with pytest.raises(ValueError, match=r"^size must be a power of two, at least 4, at most 16 "
                                         r"\(bytes\), not 2$"):
        check_power_of_two("size", 2, lo=4, hi=16, note="(bytes)")
    with pytest.raises(ValueError, match="at most 16"):
        check_power_of_two("size", 32, lo=4, hi=16)
    for v in (4.0, True, "4", None):
        with pytest.raises(TypeError, match=r"^size must be a power of two, at least 4, not "):
            check_power_of_two("size", v, lo=4)


# --- every component's Raises section ----------------------------------------------------------

_CORE = {"n": 2, "sbuf_words": 64, "psum_banks": 2, "psum_words": 8}
_SEQ = {"n": 4, "sbuf_words": 64, "psum_banks": 2, "psum_words": 8, "dram_bytes": 1 << 16}
_BAD_FORMATS = [({"formats": "bf16"}, T, "formats"), ({"formats": ()}, V, "formats"),
                ({"formats": ["fp16"]}, V, "formats")]
_BAD_PE_STAGES = [
    ({"mul_stages": "5"}, T, "mul_stages"), ({"mul_stages": -1}, V, "mul_stages"),
    ({"mul_stages": FP_MUL_MAX_CUTS + 1}, V, "mul_stages"),
    ({"add_stages": 6.0}, T, "add_stages"), ({"add_stages": FP32_ADD_MAX_STAGES + 1}, V,
                                             "add_stages"),
]
_BAD_COLLECTIVE = [
    ({"ranks": 2.0}, T, "ranks"), ({"ranks": 1}, V, "ranks"), ({"ranks": 65}, V, "ranks"),
    ({"link_width": True}, T, "link_width"), ({"link_width": 3}, V, "link_width"),
    ({"depth": 1.5}, T, "depth"), ({"depth": 0}, V, "depth"), ({"depth": (1 << 20) + 1}, V,
                                                                 "depth"),
    ({"add_stages": "2"}, T, "add_stages"), ({"add_stages": 8}, V, "add_stages"),
    ({"watchdog_cycles": 16.0}, T, "watchdog_cycles"), ({"watchdog_cycles": 15}, V,
                                                         "watchdog_cycles"),
    ({"watchdog_cycles": MAX_WATCHDOG_CYCLES + 1}, V, "watchdog_cycles"),
]
_BAD_TORUS = [
    ({"rows": 2.0}, T, "rows"), ({"rows": 1}, V, "rows"), ({"cols": 33}, V, "cols"),
    ({"cols": True}, T, "cols"), ({"rows": 8, "cols": 9}, V, r"rows \* cols"),
    *[c for c in _BAD_COLLECTIVE if "ranks" not in c[0]],
]
_BAD_NEURON_CORE = [
    ({"n": 4.0}, T, "n"), ({"n": 0}, V, "n"), ({"n": 65}, V, "n"),
    ({"sbuf_words": "64"}, T, "sbuf_words"), ({"sbuf_words": 0}, V, "sbuf_words"),
    ({"sbuf_words": (1 << 16) + 1}, V, "sbuf_words"),
    ({"psum_banks": True}, T, "psum_banks"), ({"psum_banks": 17}, V, "psum_banks"),
    ({"psum_words": None}, T, "psum_words"), ({"psum_words": 0}, V, "psum_words"),
    ({"dram_bytes": 1.0}, T, "dram_bytes"), ({"dram_bytes": 0}, V, "dram_bytes"),
    ({"dram_bytes": (1 << 32) + 1}, V, "dram_bytes"),
    ({"queue_depth": 8.0}, T, "queue_depth"), ({"queue_depth": 0}, V, "queue_depth"),
    ({"queue_depth": 257}, V, "queue_depth"),
    ({"ranks": 4, "torus_rows": 2.0}, T, "torus_rows"), ({"torus_rows": 0}, V, "torus_rows"),
    ({"torus_rows": 2}, V, "torus_rows"), ({"ranks": 6, "torus_rows": 4}, V, "torus_rows"),
    ({"ranks": 6, "torus_rows": 6}, V, "torus_rows"),
    ({"data_width": 64.0}, T, "data_width"), ({"data_width": 16}, V, "data_width"),
    ({"te_mul_stages": "5"}, T, "te_mul_stages"), ({"te_mul_stages": -1}, V, "te_mul_stages"),
    ({"te_mul_stages": FP_MUL_MAX_CUTS + 1}, V, "te_mul_stages"),
    ({"te_add_stages": 6.0}, T, "te_add_stages"),
    ({"te_add_stages": FP32_ADD_MAX_STAGES + 1}, V, "te_add_stages"),
    ({"random_bits": 16.0}, T, "random_bits"), ({"random_bits": 0}, V, "random_bits"),
    ({"max_burst": 16.0}, T, "max_burst"), ({"max_burst": 257}, V, "max_burst"),
    ({"ranks": 2.0}, T, "ranks"), ({"ranks": 1}, V, "ranks"), ({"ranks": 65}, V, "ranks"),
    ({"link_width": 1.0}, T, "link_width"), ({"link_width": 0}, V, "link_width"),
    ({"n": 4, "link_width": 5}, V, "link_width"),
    ({"n": 4, "ranks": 2, "link_width": 3}, V, "link_width"),
    ({"watchdog_cycles": True}, T, "watchdog_cycles"), ({"watchdog_cycles": 1}, V,
                                                         "watchdog_cycles"),
]

# (constructor, the legal keyword arguments, [(bad keyword arguments, exception, parameter)])
_PLAYED = {"design": "sim.tb.selftest_design:StreamRegister", "params": {}, "played": ["i"],
           "k": 4}

_COUNTED = {"design": "sim.tb.selftest_design:Pulses", "params": {}, "played": [],
            "counted": {"tick": "which"}}

COMPONENTS = [
    (ActivationEngine, {"lanes": 2}, [
        ({"lanes": "2"}, T, "lanes"), ({"lanes": 0}, V, "lanes"), ({"lanes": 257}, V, "lanes"),
        ({"glue_stages": "2"}, T, "glue_stages"), ({"glue_stages": 4}, V, "glue_stages"),
        ({"mul_stages": 1.0}, T, "mul_stages"),
        ({"mul_stages": FP32_MUL_MAX_STAGES + 1}, V, "mul_stages"),
        ({"add_stages": True}, T, "add_stages"),
        ({"add_stages": FP32_ADD_MAX_STAGES + 1}, V, "add_stages"),
        ({"sru_stages": None}, T, "sru_stages"),
        ({"sru_stages": SRU_MAX_STAGES + 1}, V, "sru_stages"),
        ({"random_bits": 16.0}, T, "random_bits"), ({"random_bits": 33}, V, "random_bits"),
        ({"targets": "bf16"}, T, "targets"), ({"targets": ()}, V, "targets"),
        ({"targets": ["int8"]}, V, "targets")]),
    (AxiMemory, {"size_bytes": 4096}, [
        ({"size_bytes": 4.0}, T, "size_bytes"), ({"size_bytes": 3000}, V, "size_bytes"),
        ({"size_bytes": 2}, V, "size_bytes"),
        ({"addr_width": "32"}, T, "addr_width"), ({"addr_width": 11}, V, "addr_width"),
        ({"addr_width": 65}, V, "addr_width"),
        ({"axil_addr_width": 12.0}, T, "axil_addr_width"),
        ({"axil_addr_width": 11}, V, "axil_addr_width"),
        ({"data_width": "64"}, T, "data_width"), ({"data_width": 512}, V, "data_width"),
        ({"size_bytes": 16, "addr_width": 4, "data_width": 256}, V, "size_bytes")]),
    (AxiLiteDecoder, {"addr_width": 16, "windows": [(0, 0x100)]}, [
        ({"addr_width": 16.0}, T, "addr_width"), ({"addr_width": 1}, V, "addr_width"),
        ({"addr_width": 65}, V, "addr_width"),
        ({"windows": 5}, T, "windows"), ({"windows": [(0, 4, 1)]}, T, "windows"),
        ({"windows": [(0.0, 4)]}, T, "windows"), ({"windows": [(0, True)]}, T, "windows"),
        ({"windows": []}, V, "windows"), ({"windows": [(0, 0x300)]}, V, "windows"),
        ({"windows": [(0, 2)]}, V, "windows"), ({"windows": [(0x800, 0x1000)]}, V, "windows"),
        ({"addr_width": 12, "windows": [(0x1000, 0x1000)]}, V, "windows"),
        ({"windows": [(0, 0x1000), (0x800, 0x100)]}, V, "windows")]),
    (BoardTop, {"divisor": 4, **_CORE}, [
        ({"divisor": 4.0}, T, "divisor"), ({"divisor": 3}, V, "divisor"),
        ({"dram_bytes": 3000}, V, "dram_bytes"), ({"dram_bytes": 2}, V, "dram_bytes"),
        ({"dram_bytes": 1 << 29}, V, "dram_bytes"), ({"dram_bytes": 1.0}, T, "dram_bytes"),
        ({"n": "2"}, T, "n"), ({"n": 0}, V, "n")]),
    (CommandQueue, {}, [
        ({"depth": "8"}, T, "depth"), ({"depth": 0}, V, "depth"), ({"depth": 257}, V, "depth"),
        ({"perf_counters": 4.0}, T, "perf_counters"),
        ({"perf_counters": -1}, V, "perf_counters"),
        ({"perf_counters": 17}, V, "perf_counters")]),
    (CollectiveEngine, {"ranks": 2}, _BAD_COLLECTIVE),
    (NeuronCore, {}, _BAD_NEURON_CORE),
    (DmaEngine, {"n": 2, "words": 4}, [
        ({"n": 2.0}, T, "n"), ({"n": 0}, V, "n"), ({"n": 257}, V, "n"),
        ({"words": "4"}, T, "words"), ({"words": 0}, V, "words"),
        ({"words": (1 << 16) + 1}, V, "words"),
        ({"max_burst": True}, T, "max_burst"), ({"max_burst": 0}, V, "max_burst"),
        ({"max_burst": 257}, V, "max_burst"),
        ({"data_width": None}, T, "data_width"), ({"data_width": 48}, V, "data_width")]),
    (Fp32Compare, {}, []),  # no parameters
    (Fp32Widen, {}, []),  # no parameters
    (ReadBuffer, {"shape": 8}, [
        ({"shape": 8, "latency": 1.5}, T, "latency"), ({"shape": 8, "latency": 0}, V, "latency")]),
    (Fp32Adder, {}, [
        ({"stages": "2"}, T, "stages"), ({"stages": None}, T, "stages"),
        ({"stages": -1}, V, "stages"), ({"stages": FP32_ADD_MAX_STAGES + 1}, V, "stages")]),
    (Fp32Multiplier, {}, [
        ({"stages": 1.0}, T, "stages"), ({"stages": True}, T, "stages"),
        ({"stages": -1}, V, "stages"), ({"stages": FP32_MUL_MAX_STAGES + 1}, V, "stages"),
        ({"operand_register": 1}, T, "operand_register")]),
    (FpMultiplier, {}, [
        ({"stages": 1.5}, T, "stages"), ({"stages": True}, T, "stages"),
        ({"stages": -1}, V, "stages"), *_BAD_FORMATS]),
    (CoreRing, {"ranks": 2, **_CORE}, [
        ({"ranks": 4.0}, T, "ranks"), ({"ranks": 1}, V, "ranks"), ({"ranks": 65}, V, "ranks"),
        ({"max_latency": 16.0}, T, "max_latency"), ({"max_latency": 0}, V, "max_latency"),
        ({"max_latency": 257}, V, "max_latency"),
        ({"n": 2.0}, T, "n"), ({"n": 0}, V, "n"), ({"watchdog_cycles": 1}, V,
                                                   "watchdog_cycles")]),
    (ModuleInstance, {"component": PE(), "module": "pe"}, [
        ({"component": "PE"}, T, "component"), ({"module": 1}, T, "module"),
        ({"module": "a.b"}, V, "module"), ({"module": ""}, V, "module"),
        ({"clocked": 1}, T, "clocked")]),
    (FpProduct, {}, [
        ({"stages": 2.5}, T, "stages"), ({"stages": -1}, V, "stages")]),
    (OperandDecoder, {}, [*_BAD_FORMATS]),
    (PE, {}, [*_BAD_PE_STAGES, ({"window": 2.0}, T, "window"), ({"window": 0}, V, "window"),
              ({"window": 17}, V, "window")]),
    (PEColumn, {"rows": 2}, [
        ({"rows": 2.0}, T, "rows"), ({"rows": True}, T, "rows"), ({"rows": 0}, V, "rows"),
        ({"rows": 257}, V, "rows"), *_BAD_PE_STAGES, *_BAD_FORMATS]),
    (LinkModel, {}, [
        ({"link_width": 1.0}, T, "link_width"), ({"link_width": 3}, V, "link_width"),
        ({"max_latency": True}, T, "max_latency"), ({"max_latency": 0}, V, "max_latency"),
        ({"max_latency": 257}, V, "max_latency"),
        ({"index": 0.0}, T, "index"), ({"index": -1}, V, "index")]),
    (TorusNode, {"rows": 2, "cols": 2}, _BAD_TORUS),
    (CollectiveTorus, {"rows": 2, "cols": 3}, [
        *_BAD_TORUS, ({"max_latency": 16.0}, T, "max_latency"),
        ({"max_latency": 0}, V, "max_latency")]),
    (CollectiveRing, {"ranks": 2}, [
        *_BAD_COLLECTIVE,
        ({"max_latency": 16.0}, T, "max_latency"), ({"max_latency": 0}, V, "max_latency")]),
    (Sequencer, _SEQ, [
        ({"n": 4.0}, T, "n"), ({"n": 0}, V, "n"), ({"n": 65}, V, "n"),
        ({"sbuf_words": "64"}, T, "sbuf_words"), ({"sbuf_words": 0}, V, "sbuf_words"),
        ({"psum_banks": True}, T, "psum_banks"), ({"psum_banks": 17}, V, "psum_banks"),
        ({"psum_words": None}, T, "psum_words"), ({"psum_words": (1 << 16) + 1}, V,
                                                   "psum_words"),
        ({"dram_bytes": 1.0}, T, "dram_bytes"), ({"dram_bytes": 0}, V, "dram_bytes"),
        ({"link_width": 1.0}, T, "link_width"), ({"link_width": 0}, V, "link_width"),
        ({"link_width": 5}, V, "link_width")]),
    (BeatPlayer, {"shape": 16, "k": 4}, [
        ({"k": "4"}, T, "k"), ({"k": 0}, V, "k"), ({"k": 1025}, V, "k")]),
    (BeatRecorder, {"shape": 16, "k": 4}, [
        ({"k": 4.0}, T, "k"), ({"k": 0}, V, "k")]),
    (RegisterPlayer, {"k": 4}, [
        ({"k": "4"}, T, "k"), ({"k": 0}, V, "k"), ({"k": 1025}, V, "k")]),
    (PlayedStreams, _PLAYED, [
        ({"k": "4"}, T, "k"), ({"k": 0}, V, "k"), ({"design": "StreamRegister"}, V, "design"),
        ({"played": ["o"]}, V, "played"), ({"played": ["nope"]}, V, "played"),
        ({"counted": {"o": None}}, V, "counted"), ({"counted": {"nope": None}}, V, "counted")]),
    (PlayedStreams, _COUNTED, [
        ({"counted": ["tick"]}, T, "counted"), ({"counted": {"which": None}}, V, "counted"),
        ({"counted": {"tick": "nope"}}, V, "counted"),
        ({"counted": {"tick": "wide"}}, V, "counted"),
        ({"counted": {"tock": None}}, V, "counted")]),  # tock_since is taken
    (PulseCounter, {"indices": 3}, [
        ({"indices": 2.0}, T, "indices"), ({"indices": 0}, V, "indices"),
        ({"indices": 257}, V, "indices")]),
    (CycleReplay, {"design": "hdl.pe:PEColumn", "params": {"rows": 2}}, [
        ({"k": None}, T, "k"), ({"k": 2000}, V, "k"),
        ({"design": "sim.tb.selftest_design:StreamRegister", "params": {}}, V, "design")]),
    (ActivityRecorder, {}, [
        ({"depth": 64.0}, T, "depth"), ({"depth": 1}, V, "depth"),
        ({"depth": (1 << 16) + 1}, V, "depth")]),
    (AxiStalls, {}, [
        ({"addr_width": 32.0}, T, "addr_width"), ({"addr_width": 0}, V, "addr_width"),
        ({"addr_width": 65}, V, "addr_width"),
        ({"data_width": 32.0}, T, "data_width"), ({"data_width": 8}, V, "data_width")]),
    (CoreWithDram, _CORE, [
        ({"ranks": 2.0}, T, "ranks"), ({"ranks": 2}, V, "ranks"),
        ({"dram_bytes": 3 << 12}, V, "dram_bytes"), ({"dram_bytes": 2}, V, "dram_bytes"),
        ({"n": "2"}, T, "n"), ({"n": 0}, V, "n")]),
    (RingWithDram, {"ranks": 2, **_CORE}, [
        ({"ranks": 2.0}, T, "ranks"), ({"ranks": 1}, V, "ranks"),
        ({"max_latency": 0}, V, "max_latency"), ({"dram_bytes": 3 << 12}, V, "dram_bytes"),
        ({"n": 0}, V, "n")]),
    (StochasticRounder, {"lanes": 2}, [
        ({"lanes": 2.0}, T, "lanes"), ({"lanes": 0}, V, "lanes"), ({"lanes": 257}, V, "lanes"),
        ({"random_bits": "16"}, T, "random_bits"), ({"random_bits": 0}, V, "random_bits"),
        ({"random_bits": 33}, V, "random_bits"),
        ({"stages": True}, T, "stages"), ({"stages": SRU_MAX_STAGES + 1}, V, "stages"),
        ({"targets": "bf16"}, T, "targets"), ({"targets": ()}, V, "targets"),
        ({"targets": ("int8",)}, V, "targets")]),
    (SystolicArray, {"n": 2}, [
        ({"n": 2.0}, T, "n"), ({"n": 0}, V, "n"), ({"n": 129}, V, "n"),
        *_BAD_PE_STAGES, *_BAD_FORMATS]),
    (TensorEngine, {"n": 2}, [
        ({"n": "2"}, T, "n"), ({"n": 0}, V, "n"), ({"n": 129}, V, "n"),
        ({"psum_banks": 8.0}, T, "psum_banks"), ({"psum_banks": 0}, V, "psum_banks"),
        ({"psum_banks": 65}, V, "psum_banks"),
        ({"psum_words": 8.0}, T, "psum_words"), ({"psum_words": 0}, V, "psum_words"),
        ({"psum_words": (1 << 16) + 1}, V, "psum_words"),
        *_BAD_PE_STAGES, *_BAD_FORMATS]),
    (UartTx, {"divisor": 4}, [
        ({"divisor": 4.0}, T, "divisor"), ({"divisor": None}, T, "divisor"),
        ({"divisor": 3}, V, "divisor")]),
    (UartRx, {"divisor": 4}, [
        ({"divisor": True}, T, "divisor"), ({"divisor": 0}, V, "divisor")]),
    (UartAxiLiteBridge, {"divisor": 8}, [
        ({"divisor": 8.0}, T, "divisor"), ({"divisor": 3}, V, "divisor"),
        ({"addr_width": 32.0}, T, "addr_width"), ({"addr_width": 1}, V, "addr_width"),
        ({"addr_width": 33}, V, "addr_width"),
        ({"timeout": 20.0}, T, "timeout"), ({"timeout": 19}, V, "timeout")]),
    (XorwowSeeder, {"lanes": 2}, [
        ({"lanes": 1.0}, T, "lanes"), ({"lanes": "1"}, T, "lanes"), ({"lanes": 0}, V, "lanes")]),
]

BAD_CASES = [pytest.param(cls, {**base, **bad}, exc, param,
                          id=f"{cls.__name__}-{exc.__name__}-"
                             + ",".join(f"{k}={v!r}" for k, v in bad.items()))
             for cls, base, cases in COMPONENTS for bad, exc, param in cases]


@pytest.mark.parametrize("cls, kwargs", [pytest.param(cls, base, id=cls.__name__)
                                         for cls, base, _ in COMPONENTS])
def test_legal_parameters_construct(cls, kwargs):
    cls(**kwargs)


@pytest.mark.parametrize("cls, kwargs, exc, param", BAD_CASES)
def test_bad_parameter_raises(cls, kwargs, exc, param):
    """The exception names the parameter first, in Amaranth's wording ("<name> must ...")."""
    with pytest.raises(exc, match=rf"^{param}(:| must)") as info:
        cls(**kwargs)
    assert type(info.value) is exc  # not a subclass standing in for the other kind


def test_every_component_is_covered():
    """Each public component in hdl/ with constructor parameters has a row in the table."""
    import importlib
    import pkgutil

    from amaranth.lib import wiring

    import hdl

    covered = {cls for cls, _, _ in COMPONENTS}
    missing = []
    for info in pkgutil.iter_modules(hdl.__path__):
        module = importlib.import_module(f"hdl.{info.name}")
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if (isinstance(obj, type) and issubclass(obj, wiring.Component)
                    and obj.__module__ == module.__name__ and obj not in covered):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, f"components without a row in COMPONENTS: {missing}"
