"""Connecting to a dask scheduler: probe what listens at the address first, safely."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

import dask


def connect(address: str, timeout: float = 10.0, security: Any = None,
            mirror_every: int | None = None) -> Any:
    """Connect to a dask cluster: a ``distributed.Client`` that becomes the default scheduler
    for every realization, or a ``ConnectionError`` naming the address within ``timeout`` s
    (whatever listens there). ``security`` is distributed's ``Security`` (needed for
    ``tls://``). With ``mirror_every=N``, optimizers copy parameters and state off the cluster
    every N steps (in the background; sets ``pargraph.mirror-every`` for the process), so
    losing the scheduler costs at most N steps.

    Examples
    --------
    >>> import pargraph
    >>> try:
    ...     pargraph.connect("tcp://127.0.0.1:1", timeout=1)
    ... except ConnectionError as error:
    ...     print(str(error)[:58])
    could not reach the dask scheduler at tcp://127.0.0.1:1 wi
    """
    from distributed import Client

    if mirror_every is not None:
        if int(mirror_every) < 0:
            raise ValueError(f"connect: mirror_every must be >= 0 (steps), got {mirror_every}")
        dask.config.set({"pargraph.mirror-every": int(mirror_every)})

    scheme, _, location = address.rpartition("://")
    if scheme in ("", "tcp", "tls") and ":" not in location.rsplit("]", 1)[-1]:
        # no port (an IPv6 host is in brackets)
        raise ValueError(f"connect: {address!r} names no port; a dask scheduler listens on "
                         f"8786 by default: try 'tcp://{location}:8786'")
    if address.startswith("tls://") and security is None:
        raise ValueError(
            f"connect: {address} is a TLS address, so pass security=: for example "
            "distributed.security.Security(tls_ca_file='ca.pem', tls_client_cert='client.pem', "
            "tls_client_key='client-key.pem', require_encryption=True) (see docker/README.md)")
    deadline = time.monotonic() + timeout
    _probe_scheduler(address, timeout, security)
    remaining = max(deadline - time.monotonic(), 0.1)
    try:
        return Client(address, timeout=f"{remaining}s", security=security)
    except (OSError, TimeoutError) as error:
        raise _unreachable(address, timeout, error) from None


def _unreachable(address: str, timeout: float, reason: Any) -> ConnectionError:
    return ConnectionError(
        f"could not reach the dask scheduler at {address} within {timeout:g} s ({reason}); "
        "is it running, and is the address right? Start one with `dask scheduler --host "
        "127.0.0.1`.")


#: Bounds of the frames the probe reads: a scheduler's identity is a few kilobytes.
PROBE_FRAMES, PROBE_BYTES = 64, 2**24


def _probe_scheduler(address: str, timeout: float, security: Any) -> None:
    """Ask whatever listens at ``address`` for its identity, on a thread of its own and bounded
    by ``timeout``: a port that accepts but never answers, or a server speaking another
    protocol (whose reply dask would read as a frame length of exabytes), becomes a
    ConnectionError instead of a hang or a MemoryError.

    The probe speaks dask's wire format itself and decodes the answers as plain msgpack,
    never as pickles: dask's own reader unpickles what a message marks as pickled, so a
    server that is not a scheduler could run code here by answering. (Once connected, the
    Client trusts the scheduler, as dask does: across machines, use TLS with certificates.)
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme not in ("tcp", "tls"):
        return  # an in-process or other transport: nothing on a network can answer
    host, port = parse_host_port(location)
    ssl_context = None
    if scheme == "tls":
        ssl_context = security.get_connection_args("client")["ssl_context"]

    async def identity() -> Any:
        deadline = time.monotonic() + timeout
        while True:  # a scheduler still starting refuses connections: retry, as dask does
            try:
                reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline - 0.05:
                    raise
                await asyncio.sleep(0.05)
        try:
            # dask's handshake (no compression), then the identity request.
            writer.write(_frame({"compression": None, "python": tuple(sys.version_info)[:3],
                                 "pickle-protocol": 5}))
            handshake = await _read_message(reader)
            writer.write(_frame({"op": "identity", "reply": True}))
            return handshake, await _read_message(reader)
        finally:
            writer.close()

    outcome: dict = {}

    def ask() -> None:
        try:
            outcome["reply"] = asyncio.run(asyncio.wait_for(identity(), timeout))
        except BaseException as error:  # MemoryError included: a bogus frame length
            outcome["error"] = error

    thread = threading.Thread(target=ask, name="pargraph-connect", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    if thread.is_alive() or isinstance(outcome.get("error"), (TimeoutError,
                                                              asyncio.TimeoutError)):
        raise _unreachable(address, timeout, "no answer")
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, (OSError, EOFError, asyncio.IncompleteReadError)):
            raise _unreachable(address, timeout, error)
        raise ConnectionError(f"the server at {address} does not speak the dask protocol "
                              f"({type(error).__name__}: {str(error)[:80]}); is the address "
                              "that of a dask scheduler?") from None
    handshake, reply = outcome["reply"]
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise ConnectionError(f"the server at {address} is not a dask scheduler (it answered "
                              f"{str(reply)[:80]!r})")
    if not _plain(handshake) or not _plain(reply):
        raise ConnectionError(f"the server at {address} answered with pickled objects, which a "
                              "dask scheduler's handshake and identity never hold: not "
                              "connecting (it could run code in this process)")


def _plain(value: Any) -> bool:
    """Whether a decoded message holds no part dask would unpickle or deserialize."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if "__Pickled__" in item or "__Serialized__" in item:
                return False
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return True


def _frame(message: dict) -> bytes:
    """``message`` as dask's TCP comm writes it: the byte count of what follows, the frame
    count and sizes, then one msgpack frame."""
    import struct

    import msgpack

    body = msgpack.packb(message, use_bin_type=True)
    prelude = struct.pack("QQ", 1, len(body))
    return struct.pack("Q", len(prelude) + len(body)) + prelude + body


async def _read_message(reader: asyncio.StreamReader) -> Any:
    """One dask message's first frame, decoded as plain msgpack (a part dask would unpickle
    stays a dict of bytes), within :data:`PROBE_FRAMES` frames and :data:`PROBE_BYTES`."""
    import struct

    import msgpack

    (length,) = struct.unpack("Q", await reader.readexactly(8))
    if not 16 <= length <= PROBE_BYTES:
        raise ValueError(f"a message of {length} bytes")
    data = await reader.readexactly(length)
    (frames,) = struct.unpack_from("Q", data)
    if not 1 <= frames <= PROBE_FRAMES or 8 * (frames + 1) > length:
        raise ValueError(f"a message of {frames} frames")
    sizes = struct.unpack_from(f"{frames}Q", data, 8)
    start = 8 * (frames + 1)
    if sum(sizes) > PROBE_BYTES:
        raise ValueError(f"a message of {sum(sizes)} bytes")
    if start + sum(sizes) > length:  # frames dask sends apart from the first read
        data += await reader.readexactly(start + sum(sizes) - length)
    return msgpack.unpackb(data[start:start + sizes[0]], raw=False, use_list=False,
                           strict_map_key=False)
