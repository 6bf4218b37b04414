"""Fixtures of the AntidoteDB client-conformance suite: a `causet start` server per test module, clients of the
published `antidotedb` package connected to it, and per-test unique buckets so that tests never share objects.

The server binary comes from $CAUSET_BIN (conformance/run.sh builds it); without it, the suite looks for
target/debug/causet under the workspace (or $CARGO_TARGET_DIR).
"""

import atexit
import ctypes
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

# The client's generated protobuf code predates protobuf 4: a stray newer runtime still works in pure Python.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

from antidotedb import AntidoteClient, Key  # noqa: E402

# The client's sockets block forever by default: a reply that never comes must fail the test instead (the client
# turns socket.timeout into AntidoteException).
socket.setdefaulttimeout(30)

WORKSPACE = pathlib.Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15

_running = []


def causet_binary():
    explicit = os.environ.get("CAUSET_BIN")
    if explicit:
        return pathlib.Path(explicit)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", WORKSPACE / "target"))
    if not target.is_absolute():
        target = WORKSPACE / target
    return target / "debug" / "causet"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode("utf-8")


class CausetServer:
    """One `causet start` process on free loopback ports with its own data directory."""

    def __init__(self, data_dir, log_path, extra_args=()):
        self.binary = causet_binary()
        self.data_dir = pathlib.Path(data_dir)
        self.log_path = pathlib.Path(log_path)
        self.extra_args = list(extra_args)
        self.host = "127.0.0.1"
        self.port = None
        self.admin_port = None
        self.process = None

    @property
    def admin_url(self):
        return f"http://{self.host}:{self.admin_port}"

    @property
    def pid(self):
        return self.process.pid

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start(self):
        if not self.binary.is_file():
            pytest.fail(f"no causet binary at {self.binary}: build it (conformance/run.sh does) or set CAUSET_BIN")
        for attempt in range(5):
            self.port, self.admin_port = free_port(), free_port()
            if self.port == self.admin_port:
                continue
            args = [
                str(self.binary), "start",
                "--data-dir", str(self.data_dir),
                "--client-bind", f"{self.host}:{self.port}",
                "--admin-bind", f"{self.host}:{self.admin_port}",
                *self.extra_args,
            ]
            with open(self.log_path, "ab") as log:
                log.write(f"$ {' '.join(args)}\n".encode())
                log.flush()
                self.process = subprocess.Popen(
                    args,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, "NO_COLOR": "1"},  # plain log files
                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                )
            _running.append(self)
            if self._wait_ready():
                return self
            self.stop()
            if "in use" not in self.log():  # Another process took a port between our probe and the bind: retry.
                break
        pytest.fail(f"causet did not start serving within {START_TIMEOUT_S} s; its log:\n{self.log()[-4000:]}")

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if port_open(self.host, self.port):
                try:
                    status, _ = http_get(f"{self.admin_url}/health", timeout=2)
                    if status == 200:
                        return True
                except OSError:
                    pass
            time.sleep(0.05)
        return False

    def stop(self):
        """SIGTERM, then SIGKILL after a timeout. Returns the exit status."""
        p = self.process
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=STOP_TIMEOUT_S)
        if self in _running:
            _running.remove(self)
        return p.returncode

    def kill(self):
        p = self.process
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(timeout=STOP_TIMEOUT_S)
        if self in _running:
            _running.remove(self)


def _die_with_parent():
    # Runs in the child before exec: on Linux, the server gets SIGTERM if the test process dies (even by SIGKILL),
    # so no server outlives the suite.
    try:
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:
        pass


def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    # A SIGTERM (a CI timeout, `timeout`, kill) interrupts the run like Ctrl-C, so fixtures stop their servers.
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)


@atexit.register
def _kill_leftovers():
    # Fixtures stop their servers; this only catches an interpreter that exits without running finalizers.
    for server in list(_running):
        server.kill()


@pytest.fixture(scope="module")
def causet(tmp_path_factory):
    """The module's server process (a CausetServer)."""
    base = tmp_path_factory.mktemp("causet")
    server = CausetServer(base / "data", base / "causet.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(causet):
    """(host, port, admin url) of the module's server."""
    return causet.host, causet.port, causet.admin_url


@pytest.fixture
def start_server(tmp_path):
    """Starts extra servers for a test (own data directories unless given); all stop when the test ends."""
    started = []

    def start(data_dir=None, extra_args=()):
        n = len(started)
        server = CausetServer(data_dir or tmp_path / f"data{n}", tmp_path / f"causet{n}.log", extra_args).start()
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def connect(server):
    """Opens AntidoteClient connections to the module's server; they close when the test ends."""
    host, port, _ = server
    clients = []

    def open_client():
        c = AntidoteClient(host, port)
        clients.append(c)
        return c

    yield open_client
    for c in clients:
        try:
            c.close()
        except Exception:
            pass


@pytest.fixture
def client(connect):
    """One AntidoteClient connection."""
    return connect()


@pytest.fixture
def bucket(request):
    """A bucket no other test uses."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", request.node.name)[:40]
    return f"{name}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def key(bucket):
    """key(type, name="k"): a Key in the test's own bucket."""

    def make(data_type, name="k"):
        return Key(bucket, name, data_type)

    return make


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _running:
        for server in _running:
            report.sections.append((f"causet log ({server.log_path}), last lines", server.log()[-3000:]))
