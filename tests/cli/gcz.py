# SPDX-License-Identifier: BSD-3-Clause
"""A reader of .gcz containers written from docs/format.md alone (format 1.0 and 1.1), for tests
that look inside containers: it checks every checksum it passes and returns each record's
metadata and streams. Not the product's reader: the tests use it to check the product's files
against the specification."""
import ctypes
import json
import struct

_xxh = ctypes.CDLL("libxxhash.so.0")  # Debian's libxxhash0, which gradcodec links too
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def xxh3(b):
    """XXH3-64 (seed 0) of the bytes."""
    return _xxh.XXH3_64bits(bytes(b), len(b))

MAGIC = b"\x89GCZ\r\n\x1a\n"
END_MAGIC = b"\x89GCZEND\n"


class Record:
    """One tensor record: name, dtype code, big_endian, descr, shape, storage, variant, streams
    [(name, width, bytes)], offset and size of its bytes in the body, and for 1.1 its footer
    entry's bytes (`entry`), check, and the ids of its tensor and layout in the footer's tables
    (`tensor`, `layout`; 1.0: None)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def stream(self, name):
        return next(b for n, _, b in self.streams if n == name)

    def set_stream(self, name, data):
        """Replaces a stream's bytes (any length; seal() writes its size and check again)."""
        i = next(k for k, (n, _, _) in enumerate(self.streams) if n == name)
        self.streams[i] = (name, self.streams[i][1], bytes(data))

    def key(self):
        """What makes two records the same record, whichever container holds them."""
        return (self.name, self.dtype, self.big_endian, self.descr, tuple(self.shape), self.storage,
                self.variant, tuple((n, w, bytes(b)) for n, w, b in self.streams))


class Reader:
    def __init__(self, bytes_):
        self.offset = 0
        self.b = bytes_

    def u8(self):
        self.offset += 1
        return self.b[self.offset - 1]

    def fixed(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.offset)
        self.offset += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def varint(self):
        v, shift = 0, 0
        while True:
            byte = self.u8()
            v |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return v

    def take(self, n):
        assert self.offset + n <= len(self.b), "past the end"
        self.offset += n
        return self.b[self.offset - n:self.offset]

    def str16(self):
        return self.take(self.fixed("H")).decode()


def _check(data, expected, what):
    assert xxh3(bytes(data)) == expected, what + ": checksum mismatch"


class Container:
    """A parsed container: .minor, .header (dict), .frames [(keyframe, source, [Record])],
    .variants (1.0: JSON text; 1.1: canonical text), .header_size, .footer_size; 1.1 also
    .tensor_bytes and .layout_bytes (the size of each entry of the footer's tensor and layout tables)."""

    def __init__(self, blob):
        blob = bytes(blob)
        assert blob[:8] == MAGIC and blob[-8:] == END_MAGIC
        major, self.minor, hlen = struct.unpack_from("<HHI", blob, 8)
        assert major == 1 and self.minor in (0, 1)
        _check(blob[:16 + hlen], struct.unpack_from("<Q", blob, 16 + hlen)[0], "header")
        self.header = json.loads(blob[16:16 + hlen])
        self.header_size = 16 + hlen + 8
        trailer = len(blob) - 24
        footer, tmajor, tminor, tsum = struct.unpack_from("<QHHI", blob, trailer)
        assert (tmajor, tminor) == (1, self.minor)
        assert tsum == xxh3(blob[trailer:trailer + 12]) & 0xFFFFFFFF
        assert blob[footer:footer + 4] == b"FOOT"
        (flen,) = struct.unpack_from("<Q", blob, footer + 4)
        assert footer + 20 + flen == trailer
        _check(blob[footer:footer + 12 + flen], struct.unpack_from("<Q", blob, footer + 12 + flen)[0], "footer")
        self.footer_size = 20 + flen
        payload = blob[footer + 12:footer + 12 + flen]
        self.header_bytes = blob[16:16 + hlen]
        if self.minor == 0:
            self._footer_10(blob, Reader(payload))
        else:
            self._footer_11(blob, Reader(payload), self.header_size, footer)

    # ---- 1.0: FRAM and TREC sections in the body, the footer an index of offsets
    def _footer_10(self, blob, r):
        self.frames = []
        for _ in range(r.fixed("I")):
            foff, count = r.fixed("QI")
            recs = [self._trec(blob, *r.fixed("QQ")) for _ in range(count)]
            (plen,) = struct.unpack_from("<I", blob, foff + 4)
            _check(blob[foff:foff + 8 + plen], struct.unpack_from("<Q", blob, foff + 8 + plen)[0], "frame")
            fr = Reader(blob[foff + 8:foff + 8 + plen])
            fr.fixed("I")
            self.frames.append((fr.u8() & 1 == 1, fr.str16(), recs))
        self.variants = [bytes(r.take(r.fixed("I"))).decode() for _ in range(r.fixed("I"))]
        assert r.offset == len(r.b)

    def _trec(self, blob, off, size):
        assert blob[off:off + 4] == b"TREC"
        (m,) = struct.unpack_from("<I", blob, off + 4)
        _check(blob[off:off + 8 + m], struct.unpack_from("<Q", blob, off + 8 + m)[0], "record metadata")
        r = Reader(blob[off + 8:off + 8 + m])
        name, dtype, flags = r.str16(), r.u8(), r.u8()
        descr = r.str16() if dtype == 0 else ""
        shape = [r.fixed("Q") for _ in range(r.u8())]
        storage, variant = r.u8(), r.varint()
        streams, at = [], off + 16 + m
        for _ in range(r.u8()):
            sname = bytes(r.take(r.u8())).decode()
            width, ssize, ssum = r.u8(), r.fixed("Q"), r.fixed("Q")
            _check(blob[at:at + ssize], ssum, "stream " + sname)
            streams.append((sname, width, blob[at:at + ssize]))
            at += ssize
        assert at == off + size
        return Record(name=name, dtype=dtype, big_endian=bool(flags & 1), descr=descr, shape=shape,
                      storage=storage, variant=variant, streams=streams, offset=off, size=size, entry=None,
                      check=None, tensor=None, layout=None)

    # ---- 1.1: the body holds the streams alone; the footer everything else
    def _footer_11(self, blob, r, body, end):
        tensors, last, self.tensor_bytes, self.layout_bytes = [], "", [], []
        for _ in range(r.varint()):
            at = r.offset
            prefix = r.varint()
            name = last[:prefix] + bytes(r.take(r.varint())).decode()
            last = name
            t = r.u8()
            ndim = t >> 4 if t >> 4 < 15 else r.u8()
            descr = bytes(r.take(r.varint())).decode() if t & 7 == 0 else ""
            shape = [r.varint() for _ in range(ndim)]
            tensors.append((name, t & 7, bool(t & 8), descr, shape))
            self.tensor_bytes.append(r.offset - at)
        self.variants = [bytes(r.take(r.varint())).decode() for _ in range(r.varint())]
        layouts = []
        for _ in range(r.varint()):
            at = r.offset
            storage, variant = r.u8(), r.varint()
            streams = []
            for _ in range(r.u8()):
                sname = bytes(r.take(r.u8())).decode()
                streams.append((sname, r.u8()))
            layouts.append((storage, variant, streams))
            self.layout_bytes.append(r.offset - at)
        paths = [i.get("path", "") for i in self.header.get("inputs", [])]
        self.frames, self.frame_flags, pos = [], [], body
        for f in range(r.varint()):
            flags = r.u8()
            source = bytes(r.take(r.varint())).decode() if flags & 2 else paths[f]
            recs, last_tensor = [], -1
            for _ in range(r.varint()):
                start = r.offset
                head = r.varint()
                delta = 0
                if head & 1:
                    z = r.varint()
                    delta = (z >> 1) ^ -(z & 1)
                tensor = last_tensor + 1 + delta
                last_tensor = tensor
                storage, variant, lay = layouts[head >> 1]
                streams, sums, off = [], [], pos
                for sname, width in lay:
                    size = r.varint()
                    streams.append((sname, width, blob[pos:pos + size]))
                    sums.append(xxh3(blob[pos:pos + size]))
                    pos += size
                (check,) = struct.unpack("<I", r.take(4))
                assert check == xxh3(struct.pack("<%dQ" % len(sums), *sums)) & 0xFFFFFFFF, \
                    "record checksum mismatch"
                name, dtype, big, descr, shape = tensors[tensor]
                recs.append(Record(name=name, dtype=dtype, big_endian=big, descr=descr, shape=shape,
                                   storage=storage, variant=variant, streams=streams, offset=off, size=pos - off,
                                   entry=bytes(r.b[start:r.offset]), check=check, tensor=tensor,
                                   layout=head >> 1))
            self.frames.append((flags & 1 == 1, source, recs))
            self.frame_flags.append(flags)
        assert r.offset == len(r.b) and pos == end
        self.tensor_count, self.layout_count = len(tensors), len(layouts)

    def records(self, frame=None):
        """Every record (of one frame when given), in order."""
        frames = self.frames if frame is None else [self.frames[frame]]
        return [rec for _, _, recs in frames for rec in recs]


# ---- writing 1.1 again (tests that craft containers: change the model, then seal it)
def varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def _section(tag, payload):
    sec = tag + struct.pack("<Q", len(payload)) + payload
    return sec + struct.pack("<Q", xxh3(sec))


def record_check(streams):
    """A 1.1 record's check: the low 32 bits of XXH3-64 over its streams' XXH3-64 values (u64 LE)."""
    return xxh3(struct.pack("<%dQ" % len(streams), *(xxh3(b) for _, _, b in streams))) & 0xFFFFFFFF


def seal(c, header_text=None, minor=1):
    """Writes the container `c` (a Container of 1.1, possibly changed: its .header or header_text,
    .variants, .frames and their Records' fields and streams) as format 1.1 with every checksum
    computed again; tables and ids assigned in order of first use, as the writer does, so that an
    unchanged Container gives its own bytes back. A Record with `check_override` keeps that check.
    `minor` is written in the preamble and trailer as it is given."""
    h = header_text
    if h is None:
        same = getattr(c, "header_bytes", None) is not None and json.loads(c.header_bytes) == c.header
        h = bytes(c.header_bytes) if same else json.dumps(c.header, separators=(",", ":")).encode()
    try:
        paths = [i.get("path", "") for i in json.loads(h).get("inputs", [])]
    except Exception:  # a hostile header: the reader refuses it before it needs the paths
        paths = [i.get("path", "") for i in c.header.get("inputs", [])]
    out = bytearray(MAGIC + struct.pack("<HHI", 1, minor, len(h)) + h)
    out += struct.pack("<Q", xxh3(out))
    tensors, tensor_ids, layouts, layout_ids, frames, last = bytearray(), {}, bytearray(), {}, bytearray(), ""
    for f, (key, source, recs) in enumerate(c.frames):
        # The frame's flags as read (a source written out stays written out), the keyframe bit as
        # the model says, and the source written out when the header's inputs do not give it.
        flags = (c.frame_flags[f] & ~1 if f < len(getattr(c, "frame_flags", [])) else 0) | int(key)
        if f >= len(paths) or paths[f] != source:
            flags |= 2
        frames.append(flags)
        if flags & 2:
            frames += varint(len(source.encode())) + source.encode()
        frames += varint(len(recs))
        last_tensor = -1
        for rec in recs:
            ndim = len(rec.shape)
            tail = bytes([rec.dtype | (8 if rec.big_endian else 0) | min(ndim, 15) << 4])
            if ndim >= 15:
                tail += bytes([ndim])
            if rec.dtype == 0:
                tail += varint(len(rec.descr.encode())) + rec.descr.encode()
            tail += b"".join(varint(d) for d in rec.shape)
            tkey = (rec.name, tail)
            if tkey not in tensor_ids:
                tensor_ids[tkey] = len(tensor_ids)
                n = min(len(last), len(rec.name))
                prefix = next((i for i in range(n) if last[i] != rec.name[i]), n)
                suffix = rec.name[prefix:].encode()
                tensors += varint(prefix) + varint(len(suffix)) + suffix + tail
                last = rec.name
            lay = bytes([rec.storage]) + varint(rec.variant) + bytes([len(rec.streams)])
            for n_, w, _ in rec.streams:
                lay += bytes([len(n_.encode())]) + n_.encode() + bytes([w])
            if lay not in layout_ids:
                layout_ids[lay] = len(layout_ids)
                layouts += lay
            t = tensor_ids[tkey]
            delta = t - (last_tensor + 1)
            frames += varint(layout_ids[lay] << 1 | (delta != 0))
            if delta:
                frames += varint((delta << 1) ^ (delta >> 63))
            frames += b"".join(varint(len(b)) for _, _, b in rec.streams)
            check = getattr(rec, "check_override", None)
            frames += struct.pack("<I", record_check(rec.streams) if check is None else check)
            last_tensor = t
            out += b"".join(bytes(b) for _, _, b in rec.streams)
    payload = varint(len(tensor_ids)) + tensors
    variants = [v if isinstance(v, bytes) else v.encode() for v in c.variants]
    payload += varint(len(variants)) + b"".join(varint(len(v)) + v for v in variants)
    payload += varint(len(layout_ids)) + layouts + varint(len(c.frames)) + frames
    footer = len(out)
    out += _section(b"FOOT", bytes(payload))
    t = struct.pack("<QHH", footer, 1, minor)
    out += t + struct.pack("<I", xxh3(t) & 0xFFFFFFFF) + END_MAGIC
    return bytes(out)


def with_stream(blob, name, expected, new):
    """The one-record container `blob` with its stream `name` (which must hold `expected`)
    replaced by `new` and the container re-sealed; checks first that re-sealing alone changes
    nothing."""
    c = Container(blob)
    assert seal(c) == bytes(blob)
    (rec,) = c.records()
    assert rec.stream(name) == expected, rec.stream(name).hex()
    rec.set_stream(name, new)
    return seal(c)
