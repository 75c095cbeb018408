"""One process per run directory: the run lock.

Two audits writing one run directory corrupt each other silently (issue 30:
a seed-0 ``results.json`` held attack results of a seed-1 run started 4 s
later). The process that opens a run directory (``run``, ``attack``,
``report``) therefore holds ``<run>/.privleak.lock``:

* **Exclusive**: an advisory ``flock`` on the file, taken without waiting; a
  second process is refused with one line naming the holder (PID, host,
  start time), which the holder writes into the file.
* **Never stale**: the kernel drops a ``flock`` when its process dies
  (``kill -9`` included), so a dead holder's lock is taken over at once.
  Where the file system does not share ``flock`` between machines, the
  holder named in the file decides: a holder on this host is stale when its
  PID is gone or now belongs to a process started at another time; a holder
  on another host cannot be checked, and the message says which file to
  delete if that run is over.
* **Re-entrant in one process**, so a command that holds it (``privleak run``
  writing results and then the report) can call library functions that
  open the same directory.
* **Shared with the workers**: the process-executor's workers and Ray tasks
  run under the driver's lock and never take it (they would block on their
  own driver). Each gets the lock's token and checks, before it marks a stage
  done, that the file still holds that token (:meth:`RunLock.verify`), so a
  worker outliving a dead driver cannot write into a directory a new run
  took over.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from ..core.errors import UserError

try:  # POSIX; on other systems the lock is the holder file alone (checked by PID)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "Holder", "RunDirBusy", "RunLock", "acquire", "locked", "verify"]

LOCK_FILE = ".privleak.lock"


def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22): PID reuse shows as a change."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@dataclass(frozen=True)
class Holder:
    """Who holds a run directory (what the lock file says)."""

    pid: int
    host: str
    started: float
    token: str
    proc_start: str | None = None

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"PID {self.pid} on {self.host}, since {when}"

    def stale(self) -> bool | None:
        """True when the holder is gone, False when it runs, None when it cannot be told (another host)."""
        if self.host != socket.gethostname():
            return None
        if not _alive(self.pid):
            return True
        now = _proc_start(self.pid)
        return bool(self.proc_start and now and now != self.proc_start)

    @classmethod
    def me(cls) -> "Holder":
        return cls(pid=os.getpid(), host=socket.gethostname(), started=time.time(), token=uuid.uuid4().hex,
                   proc_start=_proc_start(os.getpid()))

    @classmethod
    def parse(cls, text: str) -> "Holder | None":
        try:
            d = json.loads(text)
            return cls(pid=int(d["pid"]), host=str(d["host"]), started=float(d["started"]), token=str(d["token"]),
                       proc_start=d.get("proc_start"))
        except (ValueError, KeyError, TypeError):
            return None  # empty (released) or torn


class RunDirBusy(UserError):
    """Another process holds the run directory."""


def _busy(root: Path, holder: Holder | None, remote: bool = False) -> RunDirBusy:
    who = holder.describe() if holder is not None else "another process"
    if remote:
        return RunDirBusy(f"{root}: in use by another privleak ({who}; another machine, so this one cannot check "
                          f"that it still runs); wait for it to finish, or if it has stopped delete "
                          f"{root / LOCK_FILE}, or choose another run directory")
    return RunDirBusy(f"{root}: in use by another privleak ({who}); wait for it to finish or stop it, or choose "
                      "another run directory")


def _read(fd: int) -> Holder | None:
    try:
        return Holder.parse(os.pread(fd, 65536, 0).decode("utf-8", "replace"))
    except OSError:
        return None


@dataclass
class RunLock:
    """A run directory's lock held by this process (``count`` openers)."""

    root: Path
    fd: int | None
    holder: Holder
    count: int = 0

    def release(self) -> None:
        if self.fd is None:
            return
        if os.getpid() != self.holder.pid:  # a forked child exiting: the lock (and the file) stay its parent's
            self.fd = None
            return
        try:
            os.ftruncate(self.fd, 0)  # "nobody": the next opener does not have to judge a dead holder
        except OSError:
            pass
        try:
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None


_HELD: dict[str, RunLock] = {}
_SCOPES: dict[str, int] = {}


def _key(root: Path) -> str:
    return os.path.realpath(root)


def _open(path: Path, create: bool = True) -> tuple[int, bool]:
    """The lock file's descriptor and whether it is writable (a finished run may be read-only to us)."""
    flags = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, os.O_RDWR | (os.O_CREAT if create else 0) | flags, 0o600), True
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path}: is a symbolic link; remove it (privleak never follows a link for its lock)") from None
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
    return os.open(path, os.O_RDONLY | flags), False


def acquire(root: str | os.PathLike[str], create: bool = True) -> RunLock:
    """Hold ``root``'s lock (``root`` must exist); a :class:`RunDirBusy` error when another process holds it.

    ``create`` False (a reader such as ``privleak report``): a directory without a lock file is left without
    one — no privleak process has written there, so none can be writing now — and the lock is not taken."""
    root = Path(root)
    key = _key(root)
    if key in _HELD and _HELD[key].fd is not None:
        lock = _HELD[key]
        lock.count += 1
        return lock
    me = Holder.me()
    path = root / LOCK_FILE
    try:
        fd, writable = _open(path, create)
    except FileNotFoundError:  # no lock file, and a reader or a read-only directory: nobody can be writing there
        lock = RunLock(root, None, me, count=1)
        return lock
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _busy(root, _read(fd)) from None
            except OSError as exc:  # a file system without flock: the holder file alone decides
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
        previous = _read(fd)
        if previous is not None and previous.token != me.token:
            stale = previous.stale()
            if stale is None:
                raise _busy(root, previous, remote=True)
            if not stale:
                raise _busy(root, previous)
        if writable:
            data = json.dumps(asdict(me)).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    lock = RunLock(root, fd, me, count=1)
    _HELD[key] = lock
    return lock


def release(root: str | os.PathLike[str], force: bool = False) -> None:
    """Drop one opener of ``root``'s lock; the last one (or ``force``) releases it."""
    key = _key(Path(root))
    lock = _HELD.get(key)
    if lock is None:
        return
    lock.count -= 1
    if lock.count <= 0 or force:
        lock.release()
        _HELD.pop(key, None)


@contextmanager
def locked(root: str | os.PathLike[str], now: bool | None = None, create: bool = True) -> Iterator[None]:
    """The lock of ``root`` is held from where it is first taken (now, when ``root`` exists and ``now`` is
    not False, else at :meth:`RunDir.open`) to the end of the block, and released there. ``create`` False: a
    reader's lock, never creating the lock file (:func:`acquire`)."""
    root = Path(root).expanduser()
    key = _key(root)
    _SCOPES[key] = _SCOPES.get(key, 0) + 1
    took = False
    try:
        if now is True or (now is None and root.is_dir()):
            acquire(root, create)
            took = True
        yield
    finally:
        _SCOPES[key] -= 1
        if took:
            release(root)
        if _SCOPES[key] == 0:
            _SCOPES.pop(key)
            release(root, force=True)  # what RunDir.open took inside the block


def token(root: str | os.PathLike[str]) -> str | None:
    lock = _HELD.get(_key(Path(root)))
    return lock.holder.token if lock is not None and lock.fd is not None else None


def verify(root: str | os.PathLike[str], expected: str) -> None:
    """Raise unless ``root``'s lock file still holds ``expected`` (a worker checks its driver's lock)."""
    try:
        holder = Holder.parse((Path(root) / LOCK_FILE).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        holder = None
    if holder is None or holder.token != expected:
        who = holder.describe() if holder is not None else "nobody"
        raise RuntimeError(f"the run directory {root} is no longer locked by the run this worker serves "
                           f"(held by {who}); stopped without marking the stage done")


@atexit.register
def _release_all() -> None:
    for lock in list(_HELD.values()):
        lock.release()
    _HELD.clear()
