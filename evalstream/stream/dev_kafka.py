"""A real single-node KRaft Kafka broker on 127.0.0.1, for tests and local development.

The broker is assembled from Maven Central (``deploy/kafka/pom.xml``) rather than run in
Docker, because the project's machines have Java and Maven but no container engine, and
look-alike brokers get offsets and transactions wrong. Usage::

    with KafkaBroker() as broker:
        connect_to(broker.bootstrap)  # "127.0.0.1:<port>"

Environment variables:

- ``EVALSTREAM_KAFKA_POM``: path to ``deploy/kafka/pom.xml`` (needed when evalstream is
  installed from a wheel, which does not ship ``deploy/``).
- ``EVALSTREAM_KAFKA_CACHE``: directory for the broker's jars (default
  ``~/.cache/evalstream/kafka-<version>/lib``).
- ``EVALSTREAM_KEEP_KAFKA_DATA``: when set, ``stop()`` keeps the broker's data directory
  (logs included) for inspection.

Nothing here runs at import time; ``aiokafka`` is imported only by the readiness probe.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import fcntl
import hashlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType, TracebackType

from evalstream.assertions.errors import EvalstreamError

__all__ = [
    "KafkaBroker",
    "KafkaLauncherError",
    "assemble_classpath",
    "run_dev_kafka",
]

logger = logging.getLogger(__name__)

POM_ENV = "EVALSTREAM_KAFKA_POM"
CACHE_ENV = "EVALSTREAM_KAFKA_CACHE"
KEEP_DATA_ENV = "EVALSTREAM_KEEP_KAFKA_DATA"

_MARKER = ".evalstream-complete"
_NODE_ID = 1
_LOG_TAIL_LINES = 40
_STOP_TIMEOUT_S = 20.0
_MVN_TIMEOUT_S = 1800.0
_TOOL_TIMEOUT_S = 120.0
# Sized for 2-core CI machines: a small fixed heap and the serial collector.
_BROKER_JVM_OPTS = ("-Xms256m", "-Xmx768m", "-XX:+UseSerialGC")
# StorageTool lives about a second; a C1-only JIT starts it ~20 % faster (measured).
_TOOL_JVM_OPTS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_BIND_RETRIES = 3


class KafkaLauncherError(EvalstreamError):
    """The dev/test Kafka broker could not be assembled, started or reached.

    The message names the problem and the fix (install Java or Maven, check network access
    to Maven Central, read the broker log excerpt included in the message).
    """


# --- classpath -------------------------------------------------------------------------


def _find_pom(pom: Path | None) -> Path:
    if pom is None:
        from_env = os.environ.get(POM_ENV)
        pom = (
            Path(from_env)
            if from_env
            else Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "pom.xml"
        )
    if pom.is_dir():
        pom = pom / "pom.xml"
    if not pom.is_file():
        raise KafkaLauncherError(
            f"Kafka broker POM not found at {pom}. It lives in the evalstream repository at "
            "deploy/kafka/pom.xml and is not shipped in the wheel. Pass "
            "pom=<repo>/deploy/kafka/pom.xml, or set "
            f"{POM_ENV}=<repo>/deploy/kafka/pom.xml."
        )
    return pom


def _kafka_version(pom: Path) -> str:
    # The pom is the single source of truth for the version; it names the cache directory.
    try:
        root = ET.parse(pom).getroot()
    except ET.ParseError as e:
        raise KafkaLauncherError(f"cannot parse {pom}: {e}") from e
    for element in root.iter():
        if element.tag.rpartition("}")[2] == "kafka.version" and element.text:
            return element.text.strip()
    raise KafkaLauncherError(f"{pom} has no <kafka.version> property")


def _default_cache_dir(version: str) -> Path:
    from_env = os.environ.get(CACHE_ENV)
    if from_env:
        return Path(from_env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evalstream" / f"kafka-{version}" / "lib"


def _is_complete(lib_dir: Path, digest: str) -> bool:
    try:
        return (lib_dir / _MARKER).read_text().strip() == digest
    except OSError:
        return False


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    # Serialises concurrent assemblies (parallel test runs); they share ~/.m2 too, which
    # Maven 3.8 does not lock.
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tail_text(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def assemble_classpath(cache_dir: Path | None = None, *, pom: Path | None = None) -> Path:
    """Download the broker's runtime jars with Maven and return the directory holding them.

    ``cache_dir`` defaults to ``$EVALSTREAM_KAFKA_CACHE`` or
    ``~/.cache/evalstream/kafka-<version>/lib``. A directory whose marker matches the
    current pom is reused without running Maven. Jars are copied into a temporary sibling
    directory that is renamed into place only after Maven succeeded, so an interrupted run
    never leaves a half-filled directory that looks complete.
    """
    pom = _find_pom(pom)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    lib_dir = (cache_dir or _default_cache_dir(_kafka_version(pom))).expanduser().resolve()
    if _is_complete(lib_dir, digest):
        return lib_dir

    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaLauncherError(
            "Maven (mvn) not found on PATH; it downloads the Kafka broker jars from Maven "
            "Central. Install it (e.g. `apt-get install maven`), or point "
            f"{CACHE_ENV} at a directory already filled by assemble_classpath()."
        )
    lib_dir.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(lib_dir.parent / f".{lib_dir.name}.lock"):
        if _is_complete(lib_dir, digest):  # another process finished while we waited
            return lib_dir
        # Leftovers of runs that were killed before their rename; we hold the lock.
        for stale in lib_dir.parent.glob(f".{lib_dir.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{lib_dir.name}.tmp-", dir=lib_dir.parent))
        try:
            _run_maven(mvn, pom, staging)
            (staging / _MARKER).write_text(digest + "\n")
            if lib_dir.exists():  # stale: built from another pom
                shutil.rmtree(lib_dir)
            staging.rename(lib_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    logger.info("assembled Kafka classpath in %s", lib_dir)
    return lib_dir


def _run_maven(mvn: str, pom: Path, output_dir: Path) -> None:
    command = [
        mvn,
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={output_dir}",
    ]
    try:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=_MVN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise KafkaLauncherError(
            f"Maven did not finish downloading the Kafka jars within {_MVN_TIMEOUT_S:.0f} s. "
            "Check network access to Maven Central (proxy settings go in ~/.m2/settings.xml)."
        ) from e
    if result.returncode != 0:
        raise KafkaLauncherError(
            f"Maven failed (exit code {result.returncode}) to download the Kafka broker jars. "
            "Check network access to Maven Central (proxy settings go in ~/.m2/settings.xml) "
            f"and the versions in {pom}. Command: {' '.join(command)}\n"
            f"--- last lines of Maven output ---\n{_tail_text(result.stdout)}"
        )
    if not any(output_dir.glob("kafka_2.13-*.jar")):
        raise KafkaLauncherError(
            f"Maven succeeded but copied no kafka_2.13 jar into {output_dir}; "
            f"does {pom} still depend on org.apache.kafka:kafka_2.13?"
        )


# --- broker ----------------------------------------------------------------------------


def _find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaLauncherError(
            "Java not found (JAVA_HOME unset and no `java` on PATH); the Kafka 4.x broker "
            "needs a Java 17+ runtime. Install one (e.g. `apt-get install "
            "openjdk-17-jre-headless`) or set JAVA_HOME."
        )
    return java


def _free_ports(count: int, exclude: frozenset[int] = frozenset()) -> list[int]:
    # All sockets stay bound until every port is chosen, so the ports differ from each
    # other; another process can still take one before the broker binds (retried later).
    sockets: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
            if port not in exclude:
                ports.append(port)
    finally:
        for sock in sockets:
            sock.close()
    return ports


def _tail_file(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        return _tail_text(path.read_text(errors="replace"), lines)
    except OSError:
        return "(no output)"


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _broker_registered(bootstrap: str, timeout: float) -> bool:
    """One metadata round trip: True once the broker lists itself as an available broker.

    KRaft lists only unfenced brokers in metadata responses, and a fenced broker cannot
    host new partitions, so this means "ready for create_topics", not just "port open".
    """
    # Imported here so importing this module (e.g. for the CLI) never needs aiokafka.
    from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415
    from aiokafka.errors import KafkaError  # noqa: PLC0415

    async def probe() -> bool:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id="evalstream-dev-kafka-probe",
            request_timeout_ms=max(1000, int(timeout * 1000)),
        )
        try:
            await asyncio.wait_for(admin.start(), timeout)
            cluster = await asyncio.wait_for(admin.describe_cluster(), timeout)
        finally:
            await admin.close()
        return any(broker["node_id"] == _NODE_ID for broker in cluster["brokers"])

    # A thread with its own event loop: start() may be called from async code, where
    # asyncio.run() is not allowed.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        try:
            return pool.submit(asyncio.run, probe()).result()
        except (KafkaError, OSError, TimeoutError):
            return False


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with(parent_pid: int) -> Callable[[], None]:
    """A `preexec_fn` making the child (the broker JVM) receive SIGKILL when its parent dies,
    even by SIGKILL, when nothing can stop it cleanly (Linux only). The kernel ties this to
    the thread that forked the child: call it from the thread that lives as long as the
    broker should (the main thread of `evalstream dev-kafka`)."""

    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child only calls into it

    def preexec() -> None:
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)  # the broker leads its own process group


def _shutdown(proc: subprocess.Popen[bytes], data_dir: Path) -> None:
    """Stop the broker (TERM, then KILL after a timeout) and remove its data directory.

    A module-level function so ``weakref.finalize`` can call it without keeping the
    ``KafkaBroker`` alive; the finalizer runs it at most once.
    """
    try:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                logger.warning(
                    "Kafka broker (pid %d) ignored SIGTERM for %.0f s; killing it",
                    proc.pid,
                    _STOP_TIMEOUT_S,
                )
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
    finally:
        if os.environ.get(KEEP_DATA_ENV):
            logger.info("kept Kafka data directory %s (%s is set)", data_dir, KEEP_DATA_ENV)
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


class _PortInUseError(KafkaLauncherError):
    """The broker could not bind a port: another process took it after we checked."""

    def __init__(self, message: str, port: int | None) -> None:
        super().__init__(message)
        self.port = port


_BIND_FAILURE = re.compile(r"failed to bind to [^\s:]+:(\d+)")


def _ensure_port_free(port: int, role: str) -> None:
    # Fails fast with a clear message instead of a JVM stack trace ~5 s later.
    # SO_REUSEADDR matches the JVM, which can bind over TIME_WAIT connections.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as e:
            raise KafkaLauncherError(
                f"{role} port 127.0.0.1:{port} is not available ({e.strerror}). Stop the "
                f"process holding it (`ss -ltnp 'sport = :{port}'` shows it) or leave the "
                "port unset to use a free one."
            ) from e


class KafkaBroker:
    """A single-node KRaft Kafka broker (broker and controller in one JVM) on 127.0.0.1.

    Each start uses a fresh temporary data directory and a new cluster id. Use it as a
    context manager or call ``start()`` / ``stop()``; ``stop()`` is idempotent and also
    runs when the object is garbage-collected or the interpreter exits.

    ``port`` / ``controller_port`` default to free ports. ``lib_dir`` is a directory of
    jars (default: ``assemble_classpath(pom=pom)``). ``extra_properties`` are added to
    ``server.properties`` and override the defaults. ``die_with_parent`` (Linux) kills the
    broker when this process dies without stopping it (SIGKILL, a crash): start it from a
    thread that lives as long as the broker should.
    """

    def __init__(
        self,
        port: int | None = None,
        controller_port: int | None = None,
        *,
        lib_dir: Path | None = None,
        pom: Path | None = None,
        startup_timeout: float = 60.0,
        extra_properties: Mapping[str, str] | None = None,
        die_with_parent: bool = False,
    ) -> None:
        self._die_with_parent = die_with_parent and sys.platform == "linux"
        self._requested_port = port
        self._requested_controller_port = controller_port
        self._lib_dir = lib_dir
        self._pom = pom
        self._startup_timeout = startup_timeout
        self._extra_properties = dict(extra_properties or {})
        self._proc: subprocess.Popen[bytes] | None = None
        self._data_dir: Path | None = None
        self._port: int | None = None
        self._controller_port: int | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes], Path], KafkaBroker] | None = (
            None
        )

    # -- properties

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:<port>"``, for ``bootstrap_servers``."""
        return f"127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        if self._port is None:
            raise KafkaLauncherError("KafkaBroker is not started; call start() first")
        return self._port

    @property
    def controller_port(self) -> int:
        if self._controller_port is None:
            raise KafkaLauncherError("KafkaBroker is not started; call start() first")
        return self._controller_port

    @property
    def pid(self) -> int | None:
        """The broker JVM's process id, or None when not started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def data_dir(self) -> Path | None:
        return self._data_dir

    @property
    def log_path(self) -> Path | None:
        """The JVM's stdout/stderr: WARN and above, plus anything printed before logging."""
        return self._data_dir / "broker.out" if self._data_dir is not None else None

    @property
    def server_log_path(self) -> Path | None:
        """The broker's full INFO log (Log4j2, see deploy/kafka/log4j2.properties)."""
        return self._data_dir / "logs" / "server.log" if self._data_dir is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the broker and wait until it answers a metadata request."""
        if self._proc is not None:
            raise KafkaLauncherError("KafkaBroker is already started; call stop() first")
        pom = _find_pom(self._pom)
        log4j_config = pom.parent / "log4j2.properties"
        if not log4j_config.is_file():
            raise KafkaLauncherError(f"Log4j2 configuration missing: {log4j_config}")
        java = _find_java()
        lib_dir = self._lib_dir or assemble_classpath(pom=pom)
        classpath = str(lib_dir / "*")  # expanded by the java launcher, not a shell

        requested = {self._requested_port, self._requested_controller_port} - {None}
        for attempt in range(1, _BIND_RETRIES + 1):
            try:
                self._launch(java, classpath, log4j_config)
                return
            except _PortInUseError as e:
                self.stop()
                # Only a port we picked ourselves is worth picking again.
                if e.port is None or e.port in requested or attempt == _BIND_RETRIES:
                    raise
                logger.info("port %d was taken before Kafka bound it; retrying", e.port)
            except BaseException:
                self.stop()  # also on Ctrl-C: never leave a half-started JVM behind
                raise

    def _launch(self, java: str, classpath: str, log4j_config: Path) -> None:
        port = self._requested_port
        controller_port = self._requested_controller_port
        if port is not None:
            _ensure_port_free(port, "Kafka broker")
        if controller_port is not None:
            _ensure_port_free(controller_port, "Kafka controller")
        if port is None:
            exclude = frozenset({controller_port} if controller_port else set())
            port = _free_ports(1, exclude)[0]
        if controller_port is None:
            controller_port = _free_ports(1, frozenset({port}))[0]
        self._port, self._controller_port = port, controller_port

        data_dir = Path(tempfile.mkdtemp(prefix="evalstream-kafka-"))
        self._data_dir = data_dir
        (data_dir / "logs").mkdir()
        config = data_dir / "server.properties"
        config.write_text(self._server_properties(data_dir))
        jvm_common = [
            f"-Dlog4j2.configurationFile={log4j_config}",
            f"-Dkafka.logs.dir={data_dir / 'logs'}",
            "-cp",
            classpath,
        ]

        cluster_id = (
            self._run_tool(
                [java, *_TOOL_JVM_OPTS, *jvm_common, "kafka.tools.StorageTool", "random-uuid"]
            )
            .strip()
            .splitlines()[-1]
        )
        self._run_tool(
            [
                java,
                *_TOOL_JVM_OPTS,
                *jvm_common,
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "-t",
                cluster_id,
                "-c",
                str(config),
            ]
        )

        log_path = data_dir / "broker.out"
        with log_path.open("wb") as out:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                [java, *_BROKER_JVM_OPTS, *jvm_common, "kafka.Kafka", str(config)],
                cwd=data_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Own process group: a terminal's Ctrl-C reaches only us, and we stop the
                # broker cleanly instead of racing its shutdown.
                start_new_session=True,
                # Only with die_with_parent (the CLI's main thread, no other threads then).
                preexec_fn=_die_with(os.getpid()) if self._die_with_parent else None,  # noqa: PLW1509
            )
        self._proc = proc
        self._finalizer = weakref.finalize(self, _shutdown, proc, data_dir)
        self._wait_ready(proc)

    def _server_properties(self, data_dir: Path) -> str:
        listeners = (
            f"PLAINTEXT://127.0.0.1:{self._port},CONTROLLER://127.0.0.1:{self._controller_port}"
        )
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(_NODE_ID),
            # Dynamic quorum: goes with `format --standalone`; never mix with
            # controller.quorum.voters.
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self._controller_port}",
            "listeners": listeners,
            # The controller endpoint is advertised too: with a dynamic quorum the
            # controller registers itself as a voter under its advertised endpoint.
            "advertised.listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data_dir / "kraft-data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            # A single node cannot satisfy the production defaults of 3; transactions and
            # share groups hang otherwise.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # Otherwise every first group join waits 3 s.
            "group.initial.rebalance.delay.ms": "0",
            # Faust fails with PartitionsMismatch on auto-created topics; create them yourself.
            "auto.create.topics.enable": "false",
        }
        properties.update(self._extra_properties)
        return "".join(f"{key}={value}\n" for key, value in properties.items())

    def _run_tool(self, command: list[str]) -> str:
        try:
            result = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=_TOOL_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise KafkaLauncherError(
                f"Kafka StorageTool did not finish in {_TOOL_TIMEOUT_S:.0f} s: {' '.join(command)}"
            ) from e
        if result.returncode != 0:
            hint = ""
            if "UnsupportedClassVersionError" in result.stdout:
                hint = " Kafka 4.x needs Java 17 or newer; set JAVA_HOME to a Java 17+ JDK."
            raise KafkaLauncherError(
                f"Kafka StorageTool failed (exit code {result.returncode}).{hint}\n"
                f"Command: {' '.join(command)}\n--- output ---\n{_tail_text(result.stdout)}"
            )
        return result.stdout

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self._startup_timeout
        bootstrap = self.bootstrap
        while True:
            returncode = proc.poll()
            if returncode is not None:
                message = (
                    f"Kafka broker exited with code {returncode} before it was ready.\n"
                    + self.log_excerpt()
                )
                bind_failure = self._bind_failure()
                if bind_failure is not None:
                    busy = int(bind_failure.group(1))
                    raise _PortInUseError(
                        f"Kafka could not bind 127.0.0.1:{busy}: another process took it. "
                        + message,
                        busy,
                    )
                raise KafkaLauncherError(message)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaLauncherError(
                    f"Kafka broker at {bootstrap} (pid {proc.pid}) was not ready within "
                    f"{self._startup_timeout:g} s.\n" + self.log_excerpt()
                )
            # The cheap port check first keeps aiokafka from logging connection errors.
            # Short probes: a healthy broker answers in milliseconds, and the loop must get
            # back to noticing a dead process.
            if _port_open(self.port) and _broker_registered(bootstrap, min(2.0, remaining)):
                logger.info("Kafka broker ready at %s (pid %d)", bootstrap, proc.pid)
                return
            time.sleep(0.2)

    def _bind_failure(self) -> re.Match[str] | None:
        for path in (self.log_path, self.server_log_path):
            if path is not None:
                match = _BIND_FAILURE.search(_tail_file(path, 300))
                if match is not None:
                    return match
        return None

    def log_excerpt(self) -> str:
        """The last lines of the console output and of server.log, for error messages."""
        parts = []
        for label, path in (("console", self.log_path), ("server.log", self.server_log_path)):
            if path is not None:
                parts.append(f"--- last {_LOG_TAIL_LINES} lines of {path} ({label}) ---")
                parts.append(_tail_file(path))
        if not os.environ.get(KEEP_DATA_ENV):
            parts.append(f"(set {KEEP_DATA_ENV}=1 to keep the data directory and full logs)")
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, SIGKILL after 20 s) and remove its data directory.

        Idempotent; keeps the data directory when ``EVALSTREAM_KEEP_KAFKA_DATA`` is set.
        """
        if self._finalizer is not None:
            self._finalizer()  # runs _shutdown at most once
            self._finalizer = None
        elif self._data_dir is not None and not os.environ.get(KEEP_DATA_ENV):
            # Failed before the JVM started (e.g. StorageTool error).
            shutil.rmtree(self._data_dir, ignore_errors=True)
        self._proc = None
        self._data_dir = None
        self._port = None
        self._controller_port = None


# --- CLI entry point -------------------------------------------------------------------


def run_dev_kafka(port: int | None = None) -> int:
    """Run a broker in the foreground until Ctrl-C or SIGTERM; return the exit code.

    0 after a requested stop, 1 when the broker could not start or died, 130 when
    interrupted during start-up.
    """

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # one shutdown path for Ctrl-C and SIGTERM

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    # Killed with SIGKILL, this process cannot stop the broker: the kernel does.
    broker = KafkaBroker(port=port, die_with_parent=True)
    try:
        try:
            print("Starting Kafka (the first run downloads jars with Maven)...", flush=True)
            broker.start()
        except KafkaLauncherError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("interrupted during start-up", file=sys.stderr)
            return 130
        print(
            f"Kafka broker ready at {broker.bootstrap} (pid {broker.pid})\n"
            f"  logs: {broker.server_log_path}\n"
            "Point the worker at it with bootstrap servers "
            f"{broker.bootstrap} (Faust broker URL kafka://{broker.bootstrap}).\n"
            "Topics are not auto-created. Press Ctrl-C to stop.",
            flush=True,
        )
        try:
            while broker.running:
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("Stopping Kafka...", flush=True)
            return 0
        print(
            "error: Kafka broker exited unexpectedly.\n" + broker.log_excerpt(),
            file=sys.stderr,
        )
        return 1
    finally:
        broker.stop()
        signal.signal(signal.SIGTERM, previous)
