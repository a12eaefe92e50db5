# amaranth: UnusedElaboratable=no
"""`nclite board gemm` without a board: its errors are one clear line, and shapes are checked
before the port is opened. (The GEMM itself runs over the simulated UART: test_board_rtl.py.)"""

from click.testing import CliRunner

from sim.cli import main


def _run(*args):
    return CliRunner().invoke(main, ["board", "gemm", *args])


def test_shape_too_big_fails_before_the_port():
    r = _run("--port", "/dev/nclite-no-such-port", "-m", "256", "-k", "256", "-f", "256")
    assert r.exit_code == 1
    assert "does not fit the board's 65536 bytes of DRAM" in r.output, r.output
    assert "Traceback" not in r.output


def test_missing_port_is_one_line():
    r = _run("--port", "/dev/nclite-no-such-port")
    assert r.exit_code == 1 and "cannot open /dev/nclite-no-such-port" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


def test_wrong_device_answers_is_one_line_with_a_hint():
    # pyserial's loop:// echoes every byte: the "bridge" answers with our own request frame,
    # whose sync byte is wrong.
    r = _run("--port", "loop://")
    assert r.exit_code == 1, r.output
    assert "garbled answer from the bridge" in r.output and "bitstream" in r.output, r.output
    assert "Traceback" not in r.output
