"""``fdatasync`` without a thread: Linux native AIO (``IOCB_CMD_FDSYNC``, kernel 4.18+).

The journal's event loop submits the sync and goes on; the kernel runs it on its own
worker and signals an ``eventfd`` when it is done, which the loop watches like any
socket. No Python thread wakes up, takes the GIL or hands results back, so an
acknowledgement costs the kernel's sync and one loop turn.

Only the four ``io_*`` system calls are used, through ``ctypes``. Where they are
missing (another OS or architecture, a sandbox that filters them)
:func:`open_async_sync` returns ``None`` and the journal keeps its writer thread.
"""

from __future__ import annotations

import ctypes
import os
import platform
import select
import sys

# (io_setup, io_destroy, io_getevents, io_submit) per machine
_SYSCALLS = {"x86_64": (206, 207, 208, 209), "aarch64": (0, 1, 4, 2)}
_IOCB_CMD_FDSYNC = 3
_IOCB_FLAG_RESFD = 1


class _Iocb(ctypes.Structure):
    _fields_ = [  # struct iocb (linux/aio_abi.h), little-endian layout
        ("aio_data", ctypes.c_uint64), ("aio_key", ctypes.c_uint32),
        ("aio_rw_flags", ctypes.c_int32), ("aio_lio_opcode", ctypes.c_uint16),
        ("aio_reqprio", ctypes.c_int16), ("aio_fildes", ctypes.c_uint32),
        ("aio_buf", ctypes.c_uint64), ("aio_nbytes", ctypes.c_uint64),
        ("aio_offset", ctypes.c_int64), ("aio_reserved2", ctypes.c_uint64),
        ("aio_flags", ctypes.c_uint32), ("aio_resfd", ctypes.c_uint32),
    ]


class _IoEvent(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64),
                ("res", ctypes.c_int64), ("res2", ctypes.c_int64)]


class AsyncSync:
    """One AIO context with room for one sync in flight at a time."""

    def __init__(self, libc: ctypes.CDLL, calls: tuple[int, int, int, int]) -> None:
        self._libc = libc
        self._setup, self._destroy, self._getevents, self._submit = calls
        self._ctx = ctypes.c_ulong(0)
        if libc.syscall(self._setup, 4, ctypes.byref(self._ctx)) < 0:
            raise OSError(ctypes.get_errno(), "io_setup failed")
        try:
            self.eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError:
            libc.syscall(self._destroy, self._ctx)
            raise
        self._iocb = _Iocb(aio_lio_opcode=_IOCB_CMD_FDSYNC, aio_flags=_IOCB_FLAG_RESFD,
                           aio_resfd=self.eventfd)
        self._list = (ctypes.POINTER(_Iocb) * 1)(ctypes.pointer(self._iocb))
        self._events = (_IoEvent * 4)()
        self.in_flight = False

    def submit(self, fd: int) -> None:
        """Starts ``fdatasync(fd)``; the eventfd becomes readable when it is done."""
        self._iocb.aio_fildes = fd
        if self._libc.syscall(self._submit, self._ctx, 1, self._list) != 1:
            raise OSError(ctypes.get_errno(), "io_submit failed")
        self.in_flight = True

    def reap(self) -> int | None:
        """The finished sync's result (0, or minus an errno); None if none finished."""
        try:
            os.eventfd_read(self.eventfd)
        except BlockingIOError:
            return None
        n = self._libc.syscall(self._getevents, self._ctx, 0, 4, self._events, None)
        if n <= 0:
            return None
        self.in_flight = False
        return int(self._events[0].res)

    def close(self) -> None:
        """Waits for a sync in flight (the kernel does), then frees the context."""
        self._libc.syscall(self._destroy, self._ctx)
        os.close(self.eventfd)


def open_async_sync(probe_fd: int) -> AsyncSync | None:
    """An :class:`AsyncSync`, after one real sync of ``probe_fd`` proved it works;
    None where native AIO syncs are not available."""
    calls = _SYSCALLS.get(platform.machine())
    if sys.platform != "linux" or calls is None or not hasattr(os, "eventfd"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    try:
        aio = AsyncSync(libc, calls)
    except OSError:
        return None
    try:
        aio.submit(probe_fd)
        select.select([aio.eventfd], [], [], 5.0)  # once, when the journal opens
        if aio.reap() != 0:
            raise OSError("the probe sync failed")
    except OSError:
        aio.close()
        return None
    return aio
