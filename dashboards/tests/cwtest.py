"""Shared support for the dashboards tests: runs the real cachewatchd, the
`cachewatch simulate` fleet and a real Prometheus as child processes.

Standard library only. Every child gets PR_SET_PDEATHSIG(SIGKILL), so it dies
with the test even when CTest kills the test on a timeout; Processes.close()
stops them cleanly in the normal case (call it from a `finally`).
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

# Prices (USD per million tokens: input, write 5m, write 1h, read) for every
# model the simulated fleet uses, so that breaks carry an estimated cost.
PRICES = [
    "claude-sonnet-4-5=3,3.75,6,0.3",
    "claude-opus-4-1=15,18.75,30,1.5",
    "gpt-4.1=2,2,2,0.5",
    "gpt-4.1-mini=0.4,0.4,0.4,0.1",
    "gemini-2.5-pro=1.25,1.25,1.25,0.31",
    "gemini-2.5-flash=0.3,0.3,0.3,0.075",
]

# The fleet: agents are given to sessions in turn. 8 sessions x 2 lanes x 60
# turns is ~960 turns per run, enough for the rarest injected cause
# (1 % per turn) to occur with near certainty, and a few seconds of work.
AGENTS = ["claude-code", "my-agent"]
SIM_ARGS = ["--sessions", "8", "--lanes-per-session", "2", "--turns", "60",
            "--rate", "0", "--agents", ",".join(AGENTS)]

# Reasons every simulation run produces (cachewatch simulate injects every
# cause; these are the ones frequent enough to be certain in one run).
SIM_REASONS = ["tools_order_changed", "ttl_expired", "messages_changed",
               "tools_schema_changed"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # pylint: disable=broad-except
        pass


def child_env():
    """The environment without CACHEWATCH_* variables: the daemon and the
    CLI read their settings from those (token files, TLS, config files),
    and a developer's shell must not change what the test runs."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("CACHEWATCH_")}


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


class Deadline:
    """The test's overall time budget."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def check(self, what):
        if self.left() <= 0:
            raise TimeoutError(f"time budget exhausted while {what}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Child:
    """A child process whose stderr (and optionally stdout) is collected."""

    def __init__(self, name, argv, cwd=None):
        self.name = name
        self.argv = argv
        self.lines = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        log(f"start {name}:", " ".join(argv))
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=child_env(),
            preexec_fn=_die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _joined(self, last=60):
        return "\n".join(self.lines[-last:])

    def wait_for_line(self, predicate, timeout):
        """Returns the first output line for which predicate() is truthy."""
        end = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                while seen < len(self.lines):
                    result = predicate(self.lines[seen])
                    if result:
                        return result
                    seen += 1
                if not self._reader.is_alive() and seen >= len(self.lines):
                    self.proc.wait()
                    raise RuntimeError(
                        f"{self.name} exited with {self.proc.returncode}"
                        f" before it was ready:\n{self._joined()}")
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"{self.name} not ready after {timeout} s:\n"
                        f"{self._joined()}")
                self._cond.wait(min(left, 0.5))

    def output(self, last=60):
        with self._lock:
            return self._joined(last)

    def stop(self, grace=5.0):
        """SIGTERM, then SIGKILL after `grace` seconds; returns the status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} ignored SIGTERM; killing it")
                self.proc.kill()
                self.proc.wait()
        self._reader.join(2)
        return self.proc.returncode


class Processes:
    """Children to stop at the end, newest first, and a temporary directory
    removed after them (kept with CACHEWATCH_KEEP_TMP=1)."""

    def __init__(self, prefix):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.children = []
        # SIGTERM (e.g. from a CI runner) unwinds through the `finally`
        # that calls close().
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def add(self, child):
        self.children.append(child)
        return child

    def close(self, failed):
        for child in reversed(self.children):
            try:
                child.stop()
            except Exception as error:  # pylint: disable=broad-except
                log(f"stopping {child.name}: {error}")
            if failed:
                print(f"----- last output of {child.name} -----")
                print(child.output())
        if os.environ.get("CACHEWATCH_KEEP_TMP") == "1":
            log("keeping", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def start_daemon(procs, cachewatchd, db_path, timeout=30, extra=None):
    """Starts cachewatchd on loopback ports it picks; returns (child, grpc
    address, metrics address) from its "listening" log line. `extra`: more
    flags (e.g. --store=postgresql://...)."""
    argv = [cachewatchd, "--listen=127.0.0.1:0",
            "--metrics-listen=127.0.0.1:0", f"--db-path={db_path}"]
    argv += [f"--price={price}" for price in PRICES]
    argv += extra or []
    child = procs.add(Child("cachewatchd", argv))

    def listening(line):
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if isinstance(record, dict) and record.get("msg") == "listening":
            return record
        return None

    record = child.wait_for_line(listening, timeout)
    grpc, metrics = record.get("grpc"), record.get("metrics")
    if not grpc or not metrics:
        raise RuntimeError(f"listening line without addresses: {record}")
    log(f"cachewatchd: grpc {grpc}, metrics {metrics}")
    return child, grpc, metrics


def simulate(cachewatch, grpc, seed, tag, timeout=60):
    """Runs one `cachewatch simulate`; returns its stdout. Fails on a
    non-zero exit (the daemon refused or did not acknowledge records)."""
    argv = [cachewatch, "simulate", "--address", grpc, *SIM_ARGS,
            "--seed", str(seed), "--tag", tag]
    log("run:", " ".join(argv))
    started = time.monotonic()
    result = subprocess.run(argv, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=timeout,
                            env=child_env(), preexec_fn=_die_with_parent,
                            check=False)
    log(f"simulate took {time.monotonic() - started:.1f} s, exit"
        f" {result.returncode}")
    if result.returncode != 0:
        raise RuntimeError(f"cachewatch simulate failed ({result.returncode}):"
                           f"\n{result.stdout}\n{result.stderr}")
    return result.stdout


def http_get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode("utf-8")


def common_args(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cachewatchd", required=True)
    parser.add_argument("--cachewatch", required=True)
    parser.add_argument("--dashboards", required=True,
                        help="the dashboards/ source directory")
    return parser


def require_executable(path, what):
    """Exits 77 (CTest SKIP_RETURN_CODE) when a tool is not installed."""
    if not path or not (os.path.isfile(path) and os.access(path, os.X_OK)):
        resolved = shutil.which(path or "")
        if resolved:
            return resolved
        print(f"SKIPPED: {what} not found ({path!r}); "
              "install it with scripts/install-deps.sh")
        sys.exit(77)
    return path


PG_BINDIR = os.environ.get("CACHEWATCH_PG_BINDIR",
                           "/usr/lib/postgresql/15/bin")
PG_USER = "cachewatch-test"  # Runs the server when the test runs as root.


def postgres_available():
    return all(os.access(os.path.join(PG_BINDIR, b), os.X_OK)
               for b in ("initdb", "pg_ctl", "postgres", "psql"))


class Postgres:
    """A real PostgreSQL server in `parent`/pg (initdb + pg_ctl, trust auth,
    loopback TCP on a free port), as tests/support/postgres_process.h does:
    as root, the server runs as the system user cachewatch-test (created
    when missing) through runuser, since PostgreSQL refuses root."""

    name = "postgres"

    def __init__(self, parent):
        """Register it with Processes.add() so that close() stops it."""
        self.dir = os.path.join(parent, "pg")
        self.running = False
        os.mkdir(self.dir)
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            subprocess.run(["useradd", "--system", "--no-create-home",
                            "--shell", "/usr/sbin/nologin", PG_USER],
                           capture_output=True, check=False)
            shutil.chown(self.dir, PG_USER, PG_USER)
            os.chmod(parent, 0o755)
        self._run("initdb", "-D", f"{self.dir}/data", "-U", "postgres",
                  "--auth=trust", "--encoding=UTF8", "--locale=C",
                  "--no-sync")
        self.start()

    def _run(self, binary, *args, **kwargs):
        argv = [os.path.join(PG_BINDIR, binary), *args]
        if self.as_root:
            argv = ["runuser", "-u", PG_USER, "--", *argv]
        result = subprocess.run(argv, capture_output=True, text=True,
                                check=False, cwd=self.dir, **kwargs)
        if result.returncode != 0:
            raise RuntimeError(f"{binary} {' '.join(args)[:300]} failed"
                               f" ({result.returncode}):\n{result.stderr}")
        return result

    def start(self):
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1"
                   f" -c unix_socket_directories={self.dir}"
                   " -c fsync=off -c max_connections=200")
        self._run("pg_ctl", "-D", f"{self.dir}/data", "-l",
                  f"{self.dir}/server.log", "-o", options, "-w", "start")
        self.running = True

    def stop(self, mode="fast"):
        if self.running:
            self.running = False
            self._run("pg_ctl", "-D", f"{self.dir}/data", "-m", mode, "-w",
                      "stop")

    def output(self, last=60):
        try:
            with open(f"{self.dir}/server.log", encoding="utf-8") as fh:
                return "\n".join(fh.read().splitlines()[-last:])
        except OSError:
            return ""

    def url(self, database):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, database):
        self.psql("postgres", f'CREATE DATABASE "{database}"')

    def psql(self, database, sql=None, file=None, variables=None,
             stdin=None):
        """Runs psql; returns its CSV output (NULL printed as \\N)."""
        argv = ["-X", "-q", "--csv", "-P", "null=\\N", "-v",
                "ON_ERROR_STOP=1", "-d", self.url(database)]
        for name, value in (variables or {}).items():
            argv += ["-v", f"{name}={value}"]
        if file:
            # psql runs as the unprivileged server user, which may not read
            # the checkout (a clone in a 0700 temporary folder): the file is
            # read here and given on standard input.
            assert stdin is None, "file and stdin are exclusive"
            with open(file, encoding="utf-8") as fh:
                stdin = fh.read()
            argv += ["-f", "-"]
        else:
            argv += ["-c", sql]
        return self._run("psql", *argv, input=stdin).stdout
