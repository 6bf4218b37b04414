#!/usr/bin/env python3
"""A TCP proxy that emulates a WAN link by delaying every byte.

    delay-proxy.py --listen 127.0.0.11:7000 --to 127.0.0.1:7000 \
                   [--listen 127.0.0.12:7000 --to 127.0.0.2:7000 ...] \
                   --delay-ms 50 [--jitter-ms 20] [--seed N]

Each --listen is paired with the --to at the same position; one process serves
all pairs. For every accepted connection the proxy connects to the target and
draws that connection's one-way delay once, uniformly in
[delay - jitter, delay + jitter] (at least 0). The delay applies to both
directions of the connection, independently: bytes read from one side at time
t are written to the other side at t + delay, in order. Each direction is a
FIFO queue of (deadline, bytes) drained by a timer that fires at the head's
deadline and writes everything that is due; reading never waits for the delay,
so throughput does not depend on it. Different connections get different
delays, so messages that an application sends over separate connections can
overtake each other, as over a WAN with several paths.

A half-close (EOF) is forwarded after the delay too, and so is a reset (the
other side is aborted). Reading pauses while a direction holds more than
64 MiB or its receiver does not keep up. One line is logged to stderr per
connection when it opens (with its delay) and one when it closes.
Python 3.8+ standard library only. SIGTERM / SIGINT stop the proxy.
"""

import argparse
import asyncio
import collections
import itertools
import random
import selectors
import signal
import socket
import struct
import sys
import time

CONNECT_TIMEOUT_S = 10.0
MAX_QUEUED_BYTES = 64 << 20     # per direction; reading from the sender pauses above this
EARLY_S = 1e-6                  # a timer may fire this much before its deadline

EOF = 'eof'                     # sentinels in a direction's queue
RESET = 'reset'


def log(msg):
    now = time.time()
    stamp = time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(now)) + '.%03dZ' % int(now % 1 * 1000)
    print('%s %s' % (stamp, msg), file=sys.stderr, flush=True)


def host_port(text):
    host, sep, port = text.rpartition(':')
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError('expected HOST:PORT, got %r' % text)
    return host.strip('[]'), int(port)


def fmt(addr):
    return '%s:%s' % (addr[0], addr[1]) if addr else '?'


class Side(asyncio.Protocol):
    """One socket of a proxied connection, and the delay line of the bytes
    that go out through it (read from the other side, written here)."""

    def __init__(self, conn, name):
        self.conn = conn
        self.name = name            # direction of the bytes written here: 'up' or 'down'
        self.loop = conn.loop
        self.transport = None
        self.other = None           # the Side the bytes come from
        self.line = collections.deque()   # (deadline, bytes | EOF | RESET)
        self.queued = 0             # bytes in self.line
        self.timer = None
        self.write_paused = False   # our transport's buffer is above its high-water mark
        self.read_paused = False
        self.got_eof = False        # we read EOF from this socket
        self.sent_eof = False       # we wrote EOF to this socket
        self.lost = False
        self.sent = 0               # bytes written to this socket
        self.end = None             # how the direction into this socket ended

    # -- the receiving half: bytes read here go to the other side's line

    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info('socket')
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.conn.side_made(self)

    def data_received(self, data):
        self.other.push(data)

    def eof_received(self):
        self.got_eof = True
        self.other.push(EOF)
        return True                 # keep the socket open for the other direction

    def connection_lost(self, exc):
        self.lost = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.end is None:
            self.end = 'lost' if exc is None else 'reset by receiver (%s)' % exc.__class__.__name__
        if self.other is not None and not self.got_eof:
            # Reset (or closed without EOF) by this peer: the other side learns it after the delay.
            self.other.push(RESET)
        self.conn.side_lost(self)

    # -- the sending half: the delay line into this socket

    def push(self, item):
        if self.lost or self.transport is None:   # gone, or never connected
            return
        deadline = self.loop.time() + self.conn.delay
        self.line.append((deadline, item))
        if isinstance(item, bytes):
            self.queued += len(item)
        if self.timer is None:
            self.timer = self.loop.call_at(deadline, self.flush)
        self.update_flow()

    def flush(self):
        self.timer = None
        if self.lost:
            return
        limit = self.loop.time() + EARLY_S
        chunks = []
        line = self.line
        while line and line[0][0] <= limit:
            item = line.popleft()[1]
            if isinstance(item, bytes):
                chunks.append(item)
                continue
            self.write(chunks)
            chunks = []
            if item is EOF:
                self.end = 'eof'
                self.sent_eof = True
                if self.transport.can_write_eof():
                    self.transport.write_eof()
                self.conn.maybe_done()
            else:
                self.end = 'reset by sender'
                sock = self.transport.get_extra_info('socket')
                if sock is not None:
                    try:   # close with RST, as the sender's side did
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                    except OSError:
                        pass
                self.transport.abort()
            return
        self.write(chunks)
        if line:
            self.timer = self.loop.call_at(line[0][0], self.flush)
        self.update_flow()

    def write(self, chunks):
        if chunks:
            data = chunks[0] if len(chunks) == 1 else b''.join(chunks)
            self.queued -= len(data)
            self.sent += len(data)
            self.transport.write(data)

    # -- flow control: pause the sender while this direction is backed up

    def pause_writing(self):
        self.write_paused = True
        self.update_flow()

    def resume_writing(self):
        self.write_paused = False
        self.update_flow()

    def update_flow(self):
        src = self.other
        if src is None or src.transport is None or src.lost:
            return
        want_pause = self.write_paused or self.queued > MAX_QUEUED_BYTES
        if want_pause and not src.read_paused:
            src.read_paused = True
            src.transport.pause_reading()
        elif not want_pause and src.read_paused:
            src.read_paused = False
            src.transport.resume_reading()


class Conn:
    ids = itertools.count(1)

    def __init__(self, proxy, listen, target):
        self.loop = proxy.loop
        self.proxy = proxy
        self.id = next(Conn.ids)
        self.delay = None           # drawn once the target accepted the connection
        self.listen, self.target = listen, target
        self.client = Side(self, 'down')    # bytes written to the client flow "down"
        self.server = Side(self, 'up')
        self.client.other, self.server.other = self.server, self.client
        self.t0 = time.monotonic()
        self.closed = False

    def side_made(self, side):
        if side is self.client:
            self.proxy.conns.add(self)
            side.transport.pause_reading()
            side.read_paused = True
            self.loop.create_task(self.connect())

    async def connect(self):
        route = '%s -> %s => %s' % (fmt(self.client.transport.get_extra_info('peername')),
                                    fmt(self.listen), fmt(self.target))
        def connected():            # called as soon as the TCP connection to the target is up
            self.delay = self.proxy.draw_delay_s()
            return self.server
        try:
            await asyncio.wait_for(
                self.loop.create_connection(connected, self.target[0], self.target[1]),
                CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            log('conn#%d %s: cannot connect to the target (%s); closed' % (self.id, route, e.__class__.__name__))
            self.closed = True
            self.client.transport.abort()
            self.proxy.conns.discard(self)
            return
        if self.client.lost:        # the client went away while we connected
            self.server.transport.abort()
            return
        log('conn#%d %s delay %.1f ms' % (self.id, route, self.delay * 1000))
        self.client.read_paused = False
        self.client.transport.resume_reading()

    def maybe_done(self):
        c, s = self.client, self.server
        if c.got_eof and s.got_eof and c.sent_eof and s.sent_eof:
            c.transport.close()
            s.transport.close()

    def side_lost(self, side):
        c, s = self.client, self.server
        if self.closed or not (c.lost and (s.lost or s.transport is None)):
            return
        self.closed = True
        self.proxy.conns.discard(self)
        log('conn#%d closed after %.1f s: %d B up (%s), %d B down (%s)' % (
            self.id, time.monotonic() - self.t0, s.sent, s.end, c.sent, c.end))

    def abort(self):
        for side in (self.client, self.server):
            if side.transport is not None and not side.lost:
                side.transport.abort()


class Proxy:
    def __init__(self, loop, delay_ms, jitter_ms, seed):
        self.loop = loop
        self.delay_ms, self.jitter_ms = delay_ms, jitter_ms
        self.rng = random.Random(seed)
        self.conns = set()

    def draw_delay_s(self):
        ms = self.delay_ms
        if self.jitter_ms > 0:
            ms = self.rng.uniform(self.delay_ms - self.jitter_ms, self.delay_ms + self.jitter_ms)
        return max(0.0, ms) / 1000.0


async def main_async(args):
    loop = asyncio.get_running_loop()
    proxy = Proxy(loop, args.delay_ms, args.jitter_ms, args.seed)
    servers = []
    for listen, target in zip(args.listen, args.to):
        def factory(listen=listen, target=target):
            return Conn(proxy, listen, target).client
        try:
            servers.append(await loop.create_server(factory, listen[0], listen[1], reuse_address=True))
        except OSError as e:
            log('cannot listen on %s: %s' % (fmt(listen), e))
            for s in servers:
                s.close()
            return 1
        log('listening on %s => %s' % (fmt(listen), fmt(target)))
    log('ready: delay %g ms, jitter %g ms, seed %s' % (args.delay_ms, args.jitter_ms, args.seed))

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log('stopping (%d open connections)' % len(proxy.conns))
    for s in servers:
        s.close()
    for c in list(proxy.conns):
        c.abort()
    await asyncio.sleep(0.05)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--listen', action='append', type=host_port, required=True, metavar='HOST:PORT',
                   help='address to accept connections on (repeatable)')
    p.add_argument('--to', action='append', type=host_port, required=True, metavar='HOST:PORT',
                   help='where to forward the connections of the --listen at the same position')
    p.add_argument('--delay-ms', type=float, required=True, help='mean one-way delay (ms)')
    p.add_argument('--jitter-ms', type=float, default=0.0,
                   help='per-connection delay is uniform in [delay - jitter, delay + jitter] (ms)')
    p.add_argument('--seed', type=int, default=None, help='seed for the per-connection delays')
    args = p.parse_args()
    if len(args.listen) != len(args.to):
        p.error('give as many --to as --listen (%d vs %d)' % (len(args.to), len(args.listen)))
    if args.delay_ms < 0 or args.jitter_ms < 0:
        p.error('--delay-ms and --jitter-ms must be >= 0')
    # poll(2) rather than the default epoll: the epoll selector turns a timer's
    # 36 ms into 0.036000000000000004 s, which epoll_wait rounds up to 37 ms, so
    # deadlines fired ~1-2 ms late; poll(2) gets whole milliseconds (<= 1 ms late).
    loop = asyncio.SelectorEventLoop(selectors.PollSelector())
    try:
        return loop.run_until_complete(main_async(args))
    except KeyboardInterrupt:
        return 0
    finally:
        loop.close()


if __name__ == '__main__':
    sys.exit(main())
