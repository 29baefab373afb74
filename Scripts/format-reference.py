#!/usr/bin/env python3
"""Independent reference reader for PORTABLE `.nu11vlt` archives (format versions 1, 2 and 3).

This script was written from FORMAT.md ALONE, without looking at the n11archive
sources or tests, to show that the document suffices to read an archive byte-exactly.
It uses only the Python standard library plus the `cryptography` package (AES-GCM,
HKDF-SHA256, Argon2id).

What it checks, in order (section numbers refer to FORMAT.md):

  §1/§8  ZIP container: end-of-central-directory (ZIP64 aware), single disk, entry count
         <= 3 + 1,000,000 before reading entries; every central-directory entry has a
         matching local header (signature, name, flags, method, CRC, sizes); entries are
         STORED (method 0, compressed size == size), not ZIP-encrypted, not directories,
         not symbolic links; names are exactly `header.json`, `keywrap.bin`,
         `manifest.json`, then `Photos/{ID}.n11` / `Notes/{ID}.n11note` (upper-case
         canonical UUID); no duplicates; entry data lies inside the file, before the
         central directory, in central-directory order and without overlap.
  §2/§8  header.json: <= 4096 bytes (v1) or 16384 (v2) (declared size checked first), strict JSON
         object (UTF-8, no duplicate keys, no NaN), exact field set, value checks
         (format, version, mode, archiveId, created, chunkSize, kdf and its bounds).
  §3     KEK = Argon2id(password, salt, t, m, p=1, v=0x13, 32 bytes). The password is the
         first line of --password-file without its "\\n" (and one "\\r" before it); not empty.
  §4     keywrap.bin is exactly 60 bytes; CK = AES-256-GCM open with aad = header bytes.
  §5     entryKey(name) = HKDF-SHA256(CK, salt = archiveId bytes,
         info = "n11archive/v1/entry/" + name); STREAM chunks of 65536 bytes, nonce =
         11-byte big-endian counter || last flag; the stream must end with a verified
         last chunk and nothing after it; ZIP size must be a valid sealed length.
  §6/§8  manifest: sealed size implies a payload <= 256 MiB (checked before reading);
         strict JSON; exact field sets; version, archiveId, mode, created equal the
         header's; <= 1,000,000 items; ids unique canonical UUIDs; kind/compartment
         values; name 1..255 UTF-8 bytes without "/" or NUL; timestamps; `expires` only
         on fade items; size <= 2^40; sha256 lowercase hex; entry derived from kind+id;
         payloadSize == size (portable); ZIP entries after the third are exactly the
         manifest entries in order; each ZIP size == sealed length of payloadSize.
  §5/§6  every item decrypted chunk by chunk; payload length == payloadSize and
         SHA-256 == sha256. Nothing of an entry is released (exported) before its last
         chunk and digest verified; with --export, files appear under their final
         names only after the WHOLE archive verified (all or nothing).

  §2/§4  version 2: the `slots` list (types, kdf bounds, wrap lengths, counts); p256 slots
         opened with --identity (Apple ECIES: ECDH, X9.63-KDF-SHA256 with the ephemeral
         point as SharedInfo, AES-128-GCM with a 16-byte zero IV), password slots with the
         password; the candidate CK counts only if header.mac = HMAC-SHA256(HKDF(CK,
         archiveId, "n11archive/v2/header"), header bytes) verifies.

  §10    version 3 (added from FORMAT.md §10's text): the layout (header.json, header.mac,
         header.sig when the header has a signer, then pages and packs numbered from 0 in
         order, each pack after a page, Manifest/root.n11 last); the header's dependsOn
         (0...256 increasing IDs, not its own; an incremental archive reads the archives it
         names, found beside it by the ID in their header, §10.11) and signer;
         header.sig verified with Ed25519 before any slot; strict LEB128; the root's page
         list checked against every page (length, SHA-256, count, first ID, increasing
         IDs); records' flags, bounds, names and expiry; items filling each pack exactly
         in order, each pack after its page; every item's bytes decrypted from its pack,
         size and SHA-256 checked.

Usage:
  format-reference.py ARCHIVE [--password-file FILE] [--identity PEM [--passphrase-file FILE]]
                      [--export DIR] [--explain]

With --explain, stdout is pure Markdown (for FORMAT.md §9) and the one-line summary goes
to stderr; otherwise the summary is printed on stdout.

Exit status: 0 archive fully verified; 1 any failure (damaged, tampered, wrong password,
unreadable input); 2 secure archive (header validated, device key needed, not supported
here); 64 command-line usage error.
"""

import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import struct
import sys
import tempfile
from datetime import datetime

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.x963kdf import X963KDF

# ---------------------------------------------------------------- constants (FORMAT.md)

CHUNK = 65536                      # §2 chunkSize, §5
TAG = 16                           # AES-GCM tag
HEADER_MAX = 4096                  # §1, §2, §8 (version 1)
HEADER_MAX_V2 = 16384              # §2, §8 (version 2)
HEADER_MAX_V3 = 32768              # §10.2, §10.8 (version 3)
MAX_DEPENDS = 256                  # §10.2
PAGE_MAX_ITEMS, PAGE_MAX_BYTES, MAX_PAGES = 16384, 16 << 20, 1 << 24   # §10.4, §10.8
PACK_OFFSET_MAX = 1 << 41          # §10.4
ITEM_TIMES = (-62167219200000, 253402300799999)   # §10.4: 0000-01-01 ... 9999-12-31T23:59:59.999Z
# §10.3: what libsodium's verifier refuses besides a wrong signature: S >= L, a public key
# that is not canonical (y >= p), and a public key or R among the small-order encodings
# (compared with the top bit of the last byte, x's sign, cleared).
ED25519_L = 2 ** 252 + 27742317777372353535851937790883648493
ED25519_P = 2 ** 255 - 19
ED25519_SMALL_ORDER = [bytes.fromhex(h) for h in (
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")]
SIGNATURE_CONTEXT = b"n11archive/v3/header-signature\0"   # §10.3
PAGE_RE = re.compile(r"Manifest/(0|[1-9][0-9]{0,9})\.n11page")
PACK_RE = re.compile(r"Packs/(0|[1-9][0-9]{0,9})\.n11pack")
V3_NAMES = ("header.json", "header.mac", "header.sig", "Manifest/root.n11")
KEYWRAP_LEN = 60                   # §4, §8
HEADER_MAC_LEN = 32                # §4.2, §8
MAX_SLOTS, MAX_PASSWORD_SLOTS = 32, 4   # §2, §8
SLOT_WRAP_LEN = {"password": 60, "p256": 113, "device": 60}   # §2
SLOT_AAD = b"n11archive/v2/slot"   # §4.2
HEADER_MAC_INFO = b"n11archive/v2/header"  # §4.2
MANIFEST_MAX = 256 * 1024 * 1024   # §6, §8 (256 MiB)
MAX_ITEMS = 1_000_000              # §6, §8
ITEM_SIZE_MAX = 1 << 40            # §8
OPS_RANGE = (1, 32)                # §2, §8
MEM_RANGE = (8, 1_048_576)         # §2, §8 (KiB)
INFO_PREFIX = b"n11archive/v1/entry/"  # §5
SECURE_OVERHEAD = 28               # §6 payloadSize = size + 28 in secure mode

FIXED_ENTRIES = ("header.json", "keywrap.bin", "manifest.json")
SECOND_ENTRY = {1: "keywrap.bin", 2: "header.mac"}   # §1: the second entry by version
UUID_RE = r"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}"
ITEM_ENTRY_RE = re.compile(r"(?:Photos/" + UUID_RE + r"\.n11|Notes/" + UUID_RE + r"\.n11note)")
UUID_FULL_RE = re.compile(UUID_RE)
HEX_RE = re.compile(r"[0-9a-f]*")
TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z")

HEADER_FIELDS = {"format", "version", "mode", "archiveId", "created", "chunkSize", "kdf"}
HEADER_FIELDS_V2 = {"format", "version", "mode", "archiveId", "created", "chunkSize", "slots"}
KDF_FIELDS = {"algorithm", "version", "opsLimit", "memoryKiB", "parallelism", "salt"}
MANIFEST_FIELDS = {"version", "archiveId", "mode", "created", "items"}
ITEM_REQUIRED = {"id", "kind", "compartment", "name", "created", "size", "sha256",
                 "entry", "payloadSize"}
ITEM_OPTIONAL = {"expires"}

EXIT_OK, EXIT_FAIL, EXIT_SECURE, EXIT_USAGE = 0, 1, 2, 64


class Reject(Exception):
    """The archive (or an input) fails a rule of FORMAT.md."""


class SecureArchive(Exception):
    """A valid secure-mode header: the device key is needed."""


# ---------------------------------------------------------------- small helpers

def sealed_length(payload_size):
    """§5: payloadSize + 16 * max(1, ceil(payloadSize / 65536))."""
    chunks = max(1, -(-payload_size // CHUNK))
    return payload_size + TAG * chunks


def payload_for_sealed(n):
    """Inverse of sealed_length; None if n is not the length of any sealed stream."""
    if n < TAG:
        return None
    chunks = max(1, -(-n // (CHUNK + TAG)))
    p = n - TAG * chunks
    return p if p >= 0 and sealed_length(p) == n else None


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def strict_json(data, what):
    """Parse UTF-8 JSON strictly: valid UTF-8, no duplicate keys, no NaN/Infinity."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Reject(f"{what}: not valid UTF-8")

    def no_dupes(pairs):
        obj = {}
        for k, v in pairs:
            if k in obj:
                raise Reject(f"{what}: duplicate key {k!r}")
            obj[k] = v
        return obj

    def no_constants(name):
        raise Reject(f"{what}: non-standard JSON constant {name}")

    try:
        return json.loads(text, object_pairs_hook=no_dupes, parse_constant=no_constants)
    except json.JSONDecodeError as e:
        raise Reject(f"{what}: not valid JSON ({e})")
    except RecursionError:
        raise Reject(f"{what}: JSON nested too deeply")


def check_fields(obj, required, optional, what):
    if not isinstance(obj, dict):
        raise Reject(f"{what}: not a JSON object")
    keys = set(obj)
    unknown = keys - required - optional
    if unknown:
        raise Reject(f"{what}: unknown field(s) {sorted(unknown)}")
    missing = required - keys
    if missing:
        raise Reject(f"{what}: missing field(s) {sorted(missing)}")


def check_hex(value, nbytes, what):
    if not isinstance(value, str) or len(value) != 2 * nbytes or not HEX_RE.fullmatch(value):
        raise Reject(f"{what}: must be {nbytes} bytes as {2 * nbytes} lowercase hex characters")
    return bytes.fromhex(value)


def check_time(value, what):
    if not isinstance(value, str) or not TIME_RE.fullmatch(value):
        raise Reject(f"{what}: not an ISO 8601 UTC time like 2026-11-21T22:40:00Z")
    try:
        datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise Reject(f"{what}: not a valid date/time")


# ---------------------------------------------------------------- §1 ZIP container

class Entry:
    __slots__ = ("name", "size", "data_offset")

    def __init__(self, name, size, data_offset):
        self.name, self.size, self.data_offset = name, size, data_offset


def _zip64_extra(extra, want, what):
    """Read the ZIP64 extended-information extra field (0x0001): the fields listed in
    `want` (in APPNOTE order usize, csize, offset, disk) that were 0xFFFFFFFF/0xFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        hid, hlen = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4: pos + 4 + hlen]
        if len(body) != hlen:
            break
        if hid == 0x0001:
            vals, q = [], 0
            for kind in want:
                size = 4 if kind == "disk" else 8
                if q + size > len(body):
                    raise Reject(f"{what}: truncated ZIP64 extra field")
                vals.append(int.from_bytes(body[q:q + size], "little"))
                q += size
            return vals
        pos += 4 + hlen
    if want:
        raise Reject(f"{what}: ZIP64 values needed but no ZIP64 extra field")
    return []


def read_zip_layout(f, file_size, v3=False):
    """Parse the central directory and local headers; return [Entry] in CD order. With v3,
    names are checked against §10.1's names only (their order by v3_layout)."""
    # --- end of central directory (comment may follow it; must end exactly at EOF)
    tail_len = min(file_size, 22 + 65535)
    f.seek(file_size - tail_len)
    tail = f.read(tail_len)
    eocd = None
    for i in range(len(tail) - 22, -1, -1):
        if tail[i:i + 4] == b"PK\x05\x06":
            clen = struct.unpack_from("<H", tail, i + 20)[0]
            if i + 22 + clen == len(tail):
                eocd = i
                break
    if eocd is None:
        raise Reject("not a ZIP archive (no end-of-central-directory record)")
    eocd_pos = file_size - tail_len + eocd
    (_, disk, cd_disk, n_disk, n_total, cd_size, cd_off, _) = struct.unpack_from(
        "<IHHHHIIH", tail, eocd)

    # --- ZIP64 end of central directory, if present
    loc_pos = eocd_pos - 20
    zip64 = False
    if loc_pos >= 0:
        f.seek(loc_pos)
        loc = f.read(20)
        if loc[:4] == b"PK\x06\x07":
            zip64 = True
            _, z_disk, z64_off, z_disks = struct.unpack("<IIQI", loc)
            if z_disk != 0 or z_disks != 1:
                raise Reject("multi-disk ZIP archives are not accepted")
            if z64_off + 56 > loc_pos:
                raise Reject("ZIP64 end-of-central-directory record out of bounds")
            f.seek(z64_off)
            rec = f.read(56)
            if rec[:4] != b"PK\x06\x06":
                raise Reject("bad ZIP64 end-of-central-directory record")
            (_, _, _, _, disk, cd_disk, n_disk, n_total, cd_size, cd_off) = struct.unpack(
                "<IQHHIIQQQQ", rec)
            cd_end_limit = z64_off
    if not zip64:
        cd_end_limit = eocd_pos
    if disk != 0 or cd_disk != 0 or n_disk != n_total:
        raise Reject("multi-disk ZIP archives are not accepted")
    # §8: bound the entry count before reading any entry.
    if not v3 and n_total > 3 + MAX_ITEMS:
        raise Reject(f"too many ZIP entries ({n_total} > {3 + MAX_ITEMS})")
    if n_total < 3:
        raise Reject(f"ZIP has {n_total} entries; at least header.json, keywrap.bin "
                     f"and manifest.json are required")
    if cd_off + cd_size != cd_end_limit:
        raise Reject("central directory does not end where the end record says "
                     "(data prepended, appended or damaged)")

    f.seek(cd_off)
    cd = f.read(cd_size)
    if len(cd) != cd_size:
        raise Reject("central directory truncated")

    entries, seen, pos = [], set(), 0
    prev_end = 0
    for idx in range(n_total):
        if pos + 46 > len(cd) or cd[pos:pos + 4] != b"PK\x01\x02":
            raise Reject(f"central directory entry #{idx + 1} is damaged")
        (_, made_by, _need, flags, method, _t, _d, crc, csize, usize, nlen, xlen, clen,
         dstart, _iattr, eattr, lho) = struct.unpack_from("<IHHHHHHIIIHHHHHII", cd, pos)
        raw_name = cd[pos + 46: pos + 46 + nlen]
        extra = cd[pos + 46 + nlen: pos + 46 + nlen + xlen]
        if len(raw_name) != nlen or pos + 46 + nlen + xlen + clen > len(cd):
            raise Reject(f"central directory entry #{idx + 1} is truncated")
        pos += 46 + nlen + xlen + clen
        what = f"ZIP entry #{idx + 1}"
        want = [k for k, v in (("usize", usize), ("csize", csize), ("offset", lho),
                               ("disk", dstart))
                if v == (0xFFFF if k == "disk" else 0xFFFFFFFF)]
        vals = dict(zip(want, _zip64_extra(extra, want, what)))
        usize, csize = vals.get("usize", usize), vals.get("csize", csize)
        lho, dstart = vals.get("offset", lho), vals.get("disk", dstart)

        # --- name: exact bytes, no interpretation beyond UTF-8 of ASCII names
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise Reject(f"{what}: entry name is not UTF-8")
        what = f"ZIP entry #{idx + 1} ({name!r})"
        if "\x00" in name or "\\" in name or name.startswith("/") or ".." in name:
            raise Reject(f"{what}: unsafe entry name")
        if name.endswith("/") or (eattr & 0x10):
            raise Reject(f"{what}: directory entries are not accepted")
        if ((eattr >> 16) & 0o170000) == 0o120000:
            raise Reject(f"{what}: symbolic links are not accepted")
        if ((eattr >> 16) & 0o170000) == 0o040000:
            raise Reject(f"{what}: directory entries are not accepted")
        if v3:
            if name not in V3_NAMES and not PAGE_RE.fullmatch(name) and not PACK_RE.fullmatch(name):
                raise Reject(f"{what}: name is not part of the version 3 layout")
        elif idx == 1 and name in SECOND_ENTRY.values():
            pass  # which one the header's version wants is checked with the header
        elif name in FIXED_ENTRIES:
            if idx != FIXED_ENTRIES.index(name):
                raise Reject(f"{what}: {name} must be entry #{FIXED_ENTRIES.index(name) + 1}")
        elif idx < 3:
            raise Reject(f"{what}: entry #{idx + 1} must be {FIXED_ENTRIES[idx]}")
        elif not ITEM_ENTRY_RE.fullmatch(name):
            raise Reject(f"{what}: name is not part of the archive layout")
        if name in seen:
            raise Reject(f"{what}: duplicate entry name")
        seen.add(name)
        if flags & 0x0001 or flags & 0x0040 or flags & 0x2000:
            raise Reject(f"{what}: ZIP-level encryption is not accepted")
        if method != 0:
            raise Reject(f"{what}: compressed (method {method}); every entry must be STORED")
        if csize != usize:
            raise Reject(f"{what}: STORED entry with compressed size {csize} != size {usize}")
        if dstart != 0:
            raise Reject(f"{what}: multi-disk ZIP archives are not accepted")

        # --- local header must agree with the central directory
        if lho < prev_end or lho + 30 > cd_off:
            raise Reject(f"{what}: local header out of order, overlapping or out of bounds")
        f.seek(lho)
        lh = f.read(30)
        if len(lh) != 30 or lh[:4] != b"PK\x03\x04":
            raise Reject(f"{what}: no local header where the central directory points")
        (_, _lneed, lflags, lmethod, _lt, _ld, lcrc, lcsize, lusize, lnlen,
         lxlen) = struct.unpack("<IHHHHHIIIHH", lh)
        lname = f.read(lnlen)
        lextra = f.read(lxlen)
        if lname != raw_name:
            raise Reject(f"{what}: local header name differs from the central directory")
        if lflags != flags or lmethod != method:
            raise Reject(f"{what}: local header flags/method differ from the central directory")
        data_off = lho + 30 + lnlen + lxlen
        if data_off + csize > cd_off:
            raise Reject(f"{what}: entry data extends past the central directory")
        if flags & 0x0008:
            # Sizes and CRC live in a data descriptor after the data.
            f.seek(data_off + csize)
            dd = f.read(24)
            sig = 4 if dd[:4] == b"PK\x07\x08" else 0
            big = zip64 or csize >= 0xFFFFFFFF
            dlen = sig + (20 if big else 12)
            if len(dd) < dlen:
                raise Reject(f"{what}: data descriptor truncated")
            dcrc, dcs, dus = struct.unpack_from("<IQQ" if big else "<III", dd, sig)
            if (dcrc, dcs, dus) != (crc, csize, usize):
                raise Reject(f"{what}: data descriptor differs from the central directory")
            end = data_off + csize + dlen
            if end > cd_off:
                raise Reject(f"{what}: data descriptor extends past the central directory")
        else:
            lwant = [k for k, v in (("usize", lusize), ("csize", lcsize)) if v == 0xFFFFFFFF]
            if lwant:  # APPNOTE: local ZIP64 extra has both sizes
                lv = _zip64_extra(lextra, ["usize", "csize"], what)
                lusize, lcsize = lv[0], lv[1]
            if (lcrc, lcsize, lusize) != (crc, csize, usize):
                raise Reject(f"{what}: local header CRC/sizes differ from the central directory")
            end = data_off + csize
        prev_end = end
        entries.append(Entry(name, usize, data_off))
    if pos != len(cd):
        raise Reject("central directory has trailing bytes")
    return entries


def check_declared_version(prefix):
    """§2: the version first. The first local header (stored, at offset 0) holds header.json;
    if it says it is an n11archive header of a version this reader does not know, that is
    what is reported, before the new version's entries or fields are looked at."""
    if len(prefix) < 30 or prefix[:4] != b"PK\x03\x04":
        return None
    method, size, nlen, xlen = struct.unpack_from("<H", prefix, 8)[0], struct.unpack_from("<I", prefix, 18)[0], \
        struct.unpack_from("<H", prefix, 26)[0], struct.unpack_from("<H", prefix, 28)[0]
    start = 30 + nlen + xlen
    if method != 0 or prefix[30:30 + nlen] != b"header.json" or start + size > len(prefix):
        return None
    try:
        declared = json.loads(prefix[start:start + size])
    except ValueError:
        return None
    if isinstance(declared, dict) and declared.get("format") == "n11archive":
        version = declared.get("version")
        if is_int(version) and version not in (1, 2, 3):
            raise Reject(f"archive format version {version} is not supported (this reader reads versions 1, 2 and 3)")
        return version if is_int(version) else None
    return None


def read_entry(f, entry):
    f.seek(entry.data_offset)
    data = f.read(entry.size)
    if len(data) != entry.size:
        raise Reject(f"{entry.name}: truncated")
    return data


# ---------------------------------------------------------------- §2 header

def check_kdf(k, what):
    check_fields(k, KDF_FIELDS, set(), what)
    if k["algorithm"] != "argon2id":
        raise Reject(f"{what}: algorithm {k['algorithm']!r} is not 'argon2id'")
    if not is_int(k["version"]) or k["version"] != 19:
        raise Reject(f"{what}: Argon2 version {k['version']!r} is not 19 (0x13)")
    if not is_int(k["opsLimit"]) or not OPS_RANGE[0] <= k["opsLimit"] <= OPS_RANGE[1]:
        raise Reject(f"{what}: opsLimit {k['opsLimit']!r} outside 1...32")
    if not is_int(k["memoryKiB"]) or not MEM_RANGE[0] <= k["memoryKiB"] <= MEM_RANGE[1]:
        raise Reject(f"{what}: memoryKiB {k['memoryKiB']!r} outside 8...1048576")
    if not is_int(k["parallelism"]) or k["parallelism"] != 1:
        raise Reject(f"{what}: parallelism {k['parallelism']!r} is not 1")
    k["_salt"] = check_hex(k["salt"], 16, f"{what} salt")


def parse_header(data):
    h = strict_json(data, "header.json")
    if not isinstance(h, dict):
        raise Reject("header.json is not a JSON object")
    version = h.get("version")
    if is_int(version) and version == 3:
        check_fields(h, HEADER_FIELDS_V2 | {"dependsOn"}, {"signer"}, "header.json")
    elif is_int(version) and version == 2:
        check_fields(h, HEADER_FIELDS_V2, set(), "header.json")
    else:
        check_fields(h, HEADER_FIELDS - {"kdf"}, {"kdf"}, "header.json")
    if h["format"] != "n11archive":
        raise Reject(f"header.json: format is {h['format']!r}, not 'n11archive'")
    if not is_int(h["version"]) or h["version"] not in (1, 2, 3):
        raise Reject(f"header.json: unsupported version {h['version']!r}")
    if h["mode"] not in ("portable", "secure"):
        raise Reject(f"header.json: unknown mode {h['mode']!r}")
    h["_archiveId"] = check_hex(h["archiveId"], 16, "header.json archiveId")
    check_time(h["created"], "header.json created")
    if not is_int(h["chunkSize"]) or h["chunkSize"] != CHUNK:
        raise Reject(f"header.json: chunkSize {h['chunkSize']!r} (versions 1 and 2 have only 65536)")
    if h["version"] == 3:
        # §10.2: dependsOn, 0...256 increasing IDs, not the archive's own; signer optional.
        deps = h["dependsOn"]
        if not isinstance(deps, list) or len(deps) > MAX_DEPENDS:
            raise Reject(f"header.json: dependsOn must be a list of at most {MAX_DEPENDS} archive IDs")
        h["_dependsOn"] = [check_hex(d, 16, "header.json dependsOn") for d in deps]
        if any(a >= b for a, b in zip(h["_dependsOn"], h["_dependsOn"][1:])):
            raise Reject("header.json: dependsOn is not strictly increasing")
        if h["_archiveId"] in h["_dependsOn"]:
            raise Reject("header.json: the archive depends on itself")
        if "signer" in h:
            h["_signer"] = check_hex(h["signer"], 32, "header.json signer")
    if h["version"] >= 2:
        slots = h["slots"]
        if not isinstance(slots, list) or not 1 <= len(slots) <= MAX_SLOTS:
            raise Reject(f"header.json: slots must be a list of 1...{MAX_SLOTS}")
        for n, slot in enumerate(slots):
            what = f"header.json slots[{n}]"
            if not isinstance(slot, dict) or slot.get("type") not in SLOT_WRAP_LEN:
                raise Reject(f"{what}: unknown slot type")
            if slot["type"] == "password":
                check_fields(slot, {"type", "kdf", "wrap"}, set(), what)
                check_kdf(slot["kdf"], what + " kdf")
            else:
                check_fields(slot, {"type", "wrap"}, set(), what)
            slot["_wrap"] = check_hex(slot["wrap"], SLOT_WRAP_LEN[slot["type"]], what + " wrap")
            allowed = ("device",) if h["mode"] == "secure" else ("password", "p256")
            if slot["type"] not in allowed:
                raise Reject(f"{what}: a {slot['type']} slot in a {h['mode']} archive")
            if slot["type"] == "p256" and not is_p256_point(slot["_wrap"][:65]):
                # Checked before any slot is tried (§2): the outcome must not depend on
                # which identity a reader holds.
                raise Reject(f"{what}: the ephemeral key is not an uncompressed point on P-256")
        if h["mode"] == "secure" and len(slots) != 1:
            raise Reject("header.json: a secure archive has exactly one device slot")
        if sum(1 for s in slots if s["type"] == "password") > MAX_PASSWORD_SLOTS:
            raise Reject(f"header.json: more than {MAX_PASSWORD_SLOTS} password slots")
        return h
    if h["mode"] == "secure":
        if "kdf" in h:
            raise Reject("header.json: a secure archive must not have a kdf")
        return h
    if "kdf" not in h:
        raise Reject("header.json: a portable archive needs a kdf")
    check_kdf(h["kdf"], "header.json kdf")
    return h


# ---------------------------------------------------------------- §3-§5 crypto

def derive_kek(password, kdf):
    return Argon2id(salt=kdf["_salt"], length=32, iterations=kdf["opsLimit"], lanes=1,
                    memory_cost=kdf["memoryKiB"]).derive(password)


def unwrap_ck(kek, keywrap, header_bytes):
    try:
        return AESGCM(kek).decrypt(keywrap[:12], keywrap[12:], header_bytes)
    except InvalidTag:
        raise Reject("keywrap.bin does not open: wrong password or damaged header")


def is_p256_point(point):
    if len(point) != 65 or point[0] != 4:
        return False
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        return True
    except ValueError:
        return False


def open_p256_slot(identity, wrap):
    """Apple ECIES (eciesEncryptionCofactorX963SHA256AESGCM) of CK; None if not ours."""
    point = wrap[:65]
    try:
        peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        return None
    if point[0] != 4:
        return None
    z = identity.exchange(ec.ECDH(), peer)
    key = X963KDF(algorithm=hashes.SHA256(), length=16, sharedinfo=point).derive(z)
    try:
        return AESGCM(key).decrypt(b"\0" * 16, wrap[65:], None)
    except InvalidTag:
        return None


def open_password_slot(password, slot, archive_id):
    kek = derive_kek(password, slot["kdf"])
    w = slot["_wrap"]
    try:
        return AESGCM(kek).decrypt(w[:12], w[12:], SLOT_AAD + archive_id), kek
    except InvalidTag:
        return None, kek


def header_mac_ok(ck, archive_id, header_bytes, mac):
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=archive_id, info=HEADER_MAC_INFO).derive(ck)
    h = hmac.HMAC(key, hashes.SHA256())
    h.update(header_bytes)
    try:
        h.verify(mac)
        return True
    except InvalidSignature:
        return False


def load_identity(path, passphrase_path):
    data = open(path, "rb").read()
    password = read_password(passphrase_path) if passphrase_path else None
    try:
        key = serialization.load_pem_private_key(data, password=password)
    except (ValueError, TypeError) as e:
        raise Reject(f"cannot read identity {path}: {e}")
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise Reject(f"identity {path} is not a P-256 private key")
    return key


def entry_key(ck, archive_id, name):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=archive_id,
                info=INFO_PREFIX + name.encode("utf-8")).derive(ck)


def chunk_nonce(i, last):
    return i.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


def open_stream(f, entry, key, payload_size, sink, trace=None):
    """Decrypt a sealed stream of `payload_size` bytes (ZIP size already checked equal to
    its sealed length). Each verified chunk's plaintext goes to sink(bytes). Returns
    nothing; raises Reject on any failure."""
    aead = AESGCM(key)
    nchunks = max(1, -(-payload_size // CHUNK))
    f.seek(entry.data_offset)
    remaining = payload_size
    for i in range(nchunks):
        last = i == nchunks - 1
        plen = remaining if last else CHUNK
        ct = f.read(plen + TAG)
        if len(ct) != plen + TAG:
            raise Reject(f"{entry.name}: truncated in chunk {i}")
        nonce = chunk_nonce(i, last)
        try:
            pt = aead.decrypt(nonce, ct, b"")
        except InvalidTag:
            raise Reject(f"{entry.name}: chunk {i} fails authentication (damaged or tampered)")
        if trace is not None and i == 0:
            trace["nonce"], trace["tag"] = nonce, ct[-TAG:]
        remaining -= plen
        sink(pt)
    # No bytes follow the last chunk: guaranteed because the ZIP size equals
    # sealed_length(payload_size) and exactly that many bytes were consumed.
    assert remaining == 0


# ---------------------------------------------------------------- §6 manifest

def validate_manifest(m, header):
    check_fields(m, MANIFEST_FIELDS, {"vaultKeys"}, "manifest")
    if "vaultKeys" in m:
        # §6: secure archives only; compartment -> 32 lower-case hex digits (a key ID).
        keys = m["vaultKeys"]
        if m["mode"] != "secure" or not isinstance(keys, dict):
            raise Reject("manifest: vaultKeys only belongs in a secure archive, as an object")
        for name, key_id in keys.items():
            if name not in ("vault", "fade", "backup") or not isinstance(key_id, str) \
                    or len(key_id) != 32 or not HEX_RE.fullmatch(key_id):
                raise Reject(f"manifest: vaultKeys entry {name!r} is not a compartment's key ID")
    if not is_int(m["version"]) or m["version"] != 1:
        raise Reject(f"manifest: unsupported version {m['version']!r}")
    if m["archiveId"] != header["archiveId"]:
        raise Reject("manifest: archiveId differs from the header's")
    if m["mode"] != header["mode"]:
        raise Reject("manifest: mode differs from the header's")
    if m["created"] != header["created"]:
        raise Reject("manifest: created differs from the header's")
    items = m["items"]
    if not isinstance(items, list):
        raise Reject("manifest: items is not an array")
    if len(items) > MAX_ITEMS:
        raise Reject(f"manifest: {len(items)} items (at most {MAX_ITEMS})")
    ids = set()
    for n, it in enumerate(items):
        what = f"manifest item #{n + 1}"
        check_fields(it, ITEM_REQUIRED, ITEM_OPTIONAL, what)
        if not isinstance(it["id"], str) or not UUID_FULL_RE.fullmatch(it["id"]):
            raise Reject(f"{what}: id {it['id']!r} is not a canonical upper-case UUID")
        what = f"manifest item {it['id']}"
        if it["id"] in ids:
            raise Reject(f"{what}: duplicate id")
        ids.add(it["id"])
        if it["kind"] not in ("photo", "note"):
            raise Reject(f"{what}: unknown kind {it['kind']!r}")
        if it["compartment"] not in ("vault", "fade", "backup"):
            raise Reject(f"{what}: unknown compartment {it['compartment']!r}")
        if "vaultKeys" in m and it["compartment"] not in m["vaultKeys"]:
            raise Reject(f"{what}: no key ID for its compartment in vaultKeys")
        name = it["name"]
        if not isinstance(name, str):
            raise Reject(f"{what}: name is not a string")
        try:
            nb = name.encode("utf-8")
        except UnicodeEncodeError:
            raise Reject(f"{what}: name is not valid Unicode")
        if not 1 <= len(nb) <= 255 or "/" in name or "\x00" in name:
            raise Reject(f"{what}: name must be 1...255 bytes without '/' or NUL")
        check_time(it["created"], f"{what} created")
        if "expires" in it:
            if it["compartment"] != "fade":
                raise Reject(f"{what}: expires on a non-fade item")
            check_time(it["expires"], f"{what} expires")
        if not is_int(it["size"]) or not 0 <= it["size"] <= ITEM_SIZE_MAX:
            raise Reject(f"{what}: size {it['size']!r} is not an integer in 0...2^40")
        check_hex(it["sha256"], 32, f"{what} sha256")
        want = (f"Photos/{it['id']}.n11" if it["kind"] == "photo"
                else f"Notes/{it['id']}.n11note")
        if it["entry"] != want:
            raise Reject(f"{what}: entry {it['entry']!r} should be {want!r}")
        overhead = 0 if header["mode"] == "portable" else SECURE_OVERHEAD
        if not is_int(it["payloadSize"]) or it["payloadSize"] != it["size"] + overhead:
            raise Reject(f"{what}: payloadSize {it['payloadSize']!r} should be "
                         f"{it['size'] + overhead}")
    return items


# ---------------------------------------------------------------- driver

def read_password(path):
    try:
        with open(path, "rb") as pf:
            raw = pf.read(1 << 16)
    except OSError as e:
        raise Reject(f"cannot read password file: {e.strerror}")
    # FORMAT.md §3: the first line, without its LF and one CR before it.
    pw = raw.split(b"\n", 1)[0]
    if pw.endswith(b"\r"):
        pw = pw[:-1]
    if not pw:
        raise Reject("the password (first line of the password file) is empty")
    return pw


# Where run() is, for --testkit: a rejection is a "header", "key", "manifest" or "payload"
# failure according to the step that refused the archive.
STAGE = "header"


def run(args):
    global STAGE
    STAGE = "header"
    out = []  # --explain lines
    try:
        f = open(args.archive, "rb")
    except OSError as e:
        raise Reject(f"cannot open archive: {e.strerror}")
    with f:
        file_size = os.fstat(f.fileno()).st_size
        declared = check_declared_version(f.read(65536))
        f.seek(0)
        if declared == 3:
            return run_v3(args, f, file_size)
        entries = read_zip_layout(f, file_size)
        hdr_e, kw_e, man_e = entries[:3]
        item_entries = entries[3:]

        # §2: size bound before reading; then validate before deriving anything.
        if hdr_e.size > HEADER_MAX_V2:
            raise Reject(f"header.json is {hdr_e.size} bytes (at most {HEADER_MAX_V2})")
        header_bytes = read_entry(f, hdr_e)
        header = parse_header(header_bytes)
        version = header["version"]
        if version == 3:
            raise Reject("a version 3 header in a version 1 or 2 layout")
        if version == 1 and hdr_e.size > HEADER_MAX:
            raise Reject(f"header.json is {hdr_e.size} bytes (at most {HEADER_MAX} in version 1)")
        if kw_e.name != SECOND_ENTRY[version]:
            raise Reject(f"entry #2 is {kw_e.name}; a version {version} archive has {SECOND_ENTRY[version]}")
        want = KEYWRAP_LEN if version == 1 else HEADER_MAC_LEN
        if kw_e.size != want:
            raise Reject(f"{kw_e.name} is {kw_e.size} bytes (must be {want})")
        man_payload = payload_for_sealed(man_e.size)
        if man_payload is None:
            raise Reject(f"manifest.json size {man_e.size} is not a valid sealed-stream length")
        if man_payload > MANIFEST_MAX:
            raise Reject(f"manifest payload {man_payload} bytes exceeds 256 MiB")
        if header["mode"] == "secure":
            raise SecureArchive()

        STAGE = "key"
        keywrap = read_entry(f, kw_e)
        kek = None
        if version == 1:
            if args.password_file is None:
                raise Reject("a portable archive needs --password-file")
            password = read_password(args.password_file)
            kdf = header["kdf"]
            kek = derive_kek(password, kdf)
            ck = unwrap_ck(kek, keywrap, header_bytes)
        else:
            ck = open_content_key(args, header, header_bytes, keywrap)
        STAGE = "manifest"
        archive_id = header["_archiveId"]

        # §5/§6 manifest
        mkey = entry_key(ck, archive_id, "manifest.json")
        mbuf = bytearray()
        mtrace = {}
        open_stream(f, man_e, mkey, man_payload, mbuf.extend, mtrace)
        manifest_bytes = bytes(mbuf)
        manifest = strict_json(manifest_bytes, "manifest")
        items = validate_manifest(manifest, header)

        # §1/§6: ZIP entries after the first three == manifest entries, in order; sizes.
        if len(item_entries) != len(items):
            raise Reject(f"ZIP has {len(item_entries)} item entries, manifest lists {len(items)}")
        for ze, it in zip(item_entries, items):
            if ze.name != it["entry"]:
                raise Reject(f"ZIP entry {ze.name!r} where the manifest expects {it['entry']!r}")
            if ze.size != sealed_length(it["payloadSize"]):
                raise Reject(f"{ze.name}: ZIP size {ze.size} != sealed length "
                             f"{sealed_length(it['payloadSize'])} of payloadSize "
                             f"{it['payloadSize']}")

        if args.explain and version == 1:
            out += explain_head(header_bytes, header, kek, keywrap, ck, mkey, mtrace)
        elif args.explain:
            out += explain_head_v2(header_bytes, header, args, keywrap, ck, mkey, mtrace)

        # §5/§6 items: verify each completely before releasing it.
        STAGE = "payload"
        stage = None
        if args.export:
            os.makedirs(args.export, exist_ok=True)
            for it in items:
                if os.path.lexists(os.path.join(args.export, it["id"])):
                    raise Reject(f"export target {os.path.join(args.export, it['id'])} exists")
            stage = tempfile.mkdtemp(prefix=".format-reference-", dir=args.export)
        try:
            total = 0
            for n, (ze, it) in enumerate(zip(item_entries, items)):
                key = entry_key(ck, archive_id, ze.name)
                digest = hashlib.sha256()
                count = [0]
                keep = args.explain and it["size"] <= 4096
                held = bytearray()
                spool = tempfile.SpooledTemporaryFile(max_size=64 << 20,
                                                      dir=stage) if stage else None

                def sink(pt, digest=digest, count=count, spool=spool, held=held, keep=keep):
                    digest.update(pt)
                    count[0] += len(pt)
                    if spool is not None:
                        spool.write(pt)
                    if keep:
                        held.extend(pt)

                trace = {}
                open_stream(f, ze, key, it["payloadSize"], sink, trace)
                if count[0] != it["payloadSize"]:
                    raise Reject(f"{ze.name}: payload is {count[0]} bytes, "
                                 f"manifest says {it['payloadSize']}")
                if digest.hexdigest() != it["sha256"]:
                    raise Reject(f"{ze.name}: SHA-256 differs from the manifest")
                total += it["size"]
                # Verified: only now is the plaintext released (to the staging dir).
                if spool is not None:
                    spool.seek(0)
                    fd = os.open(os.path.join(stage, it["id"]),
                                 os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "wb") as dst:
                        shutil.copyfileobj(spool, dst, 1 << 20)
                    spool.close()
                if args.explain:
                    out += explain_item(n, ze.name, key, trace, it, bytes(held) if keep else None)
            if stage:
                # Whole archive verified: move every file to its final name.
                for it in items:
                    os.rename(os.path.join(stage, it["id"]), os.path.join(args.export, it["id"]))
        finally:
            if stage:
                shutil.rmtree(stage, ignore_errors=True)

    if args.explain:
        out += ["#### Decrypted manifest (`manifest.json` payload, exact bytes)", "",
                "```json", manifest_bytes.decode("utf-8"), "```", ""]
        print("\n".join(out))
    # With --explain stdout is pure Markdown; the summary goes to stderr.
    print(f"OK: portable archive {header['archiveId']}, {len(items)} item(s), "
          f"{total} bytes of content, every tag, size and SHA-256 verified"
          + (f", exported to {args.export}" if args.export else ""),
          file=sys.stderr if args.explain else sys.stdout)


# ---------------------------------------------------------------- §10 version 3

class Bin:
    """§10.4: fixed-size fields and strict unsigned LEB128."""

    def __init__(self, data, what):
        self.d, self.i, self.what = data, 0, what

    def take(self, n):
        if self.i + n > len(self.d):
            raise Reject(f"{self.what}: ends early")
        out = self.d[self.i:self.i + n]
        self.i += n
        return out

    def int(self, bound, field):
        value, shift = 0, 0
        while True:
            if shift >= 63:
                raise Reject(f"{self.what}: {field} is longer than 63 bits")
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if b == 0 and shift > 0:
                    raise Reject(f"{self.what}: {field} is not in its shortest form")
                break
            shift += 7
        if value > bound:
            raise Reject(f"{self.what}: {field} {value} is above {bound}")
        return value

    def signed(self, low, high, field):
        """§10.4: a zigzag-encoded signed integer (0, -1, 1, -2, ... as 0, 1, 2, 3, ...)."""
        raw = self.int((1 << 63) - 1, field)
        value = (raw >> 1) ^ -(raw & 1)
        if not low <= value <= high:
            raise Reject(f"{self.what}: {field} {value} is outside {low}...{high}")
        return value

    def end(self):
        if self.i != len(self.d):
            raise Reject(f"{self.what}: {len(self.d) - self.i} bytes follow the end")


def ed25519_verifies(public, signature, message):
    """§10.3: RFC 8032 verification with libsodium's extra refusals (see ED25519_*)."""
    def small_order(point):
        return any(point[:31] == bad[:31] and (point[31] & 0x7F) == bad[31] for bad in ED25519_SMALL_ORDER)
    if len(public) != 32 or len(signature) != 64:
        return False
    if int.from_bytes(signature[32:], "little") >= ED25519_L:
        return False
    if (int.from_bytes(public, "little") & ((1 << 255) - 1)) >= ED25519_P or small_order(public) or small_order(signature[:32]):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
        return True
    except (InvalidSignature, ValueError):
        return False


def canonical_id(b):
    h = b.hex().upper()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def v3_layout(entries):
    """§10.1: header.json, header.mac, [header.sig], pages and packs in order, root last."""
    if len(entries) < 3 or entries[0].name != "header.json":
        raise Reject("entry #1 must be header.json")
    if entries[1].name != "header.mac":
        raise Reject("entry #2 of a version 3 archive must be header.mac")
    if entries[-1].name != "Manifest/root.n11":
        raise Reject("the last entry of a version 3 archive must be Manifest/root.n11")
    rest = entries[2:-1]
    sig = None
    if rest and rest[0].name == "header.sig":
        sig, rest = rest[0], rest[1:]
    pages, packs, page_of_pack = [], [], []
    for e in rest:
        if e.name == f"Manifest/{len(pages)}.n11page":
            pages.append(e)
        elif e.name == f"Packs/{len(packs)}.n11pack" and pages:
            packs.append(e)
            page_of_pack.append(len(pages) - 1)
        else:
            raise Reject(f"{e.name}: not where the version 3 layout puts it")
    for e in pages + packs + [entries[-1]]:
        if payload_for_sealed(e.size) is None:
            raise Reject(f"{e.name}: size {e.size} is not a valid sealed-stream length")
    if len(pages) > MAX_PAGES:
        raise Reject(f"{len(pages)} pages (at most {MAX_PAGES})")
    return {"sig": sig, "pages": pages, "packs": packs, "page_of_pack": page_of_pack, "root": entries[-1]}


def open_content_key(args, header, header_bytes, mac):
    """§4.2: p256 slots with --identity, then password slots; CK only if header.mac verifies."""
    ck = None
    identity = getattr(args, "identity", None)
    if identity:
        key = load_identity(identity, getattr(args, "passphrase_file", None))
        for slot in header["slots"]:
            if slot["type"] == "p256":
                ck = open_p256_slot(key, slot["_wrap"])
                if ck is not None:
                    break
    if ck is None and args.password_file:
        password = read_password(args.password_file)
        for slot in header["slots"]:
            if slot["type"] == "password":
                ck, _ = open_password_slot(password, slot, header["_archiveId"])
                if ck is not None:
                    break
    if ck is None:
        kinds = sorted({s["type"] for s in header["slots"]})
        raise Reject(f"no slot opens with what was given (slots: {', '.join(kinds)})")
    if len(ck) != 32 or not header_mac_ok(ck, header["_archiveId"], header_bytes, mac):
        raise Reject("header.mac does not verify: the header or its slots were changed")
    return ck


def read_sealed(f, entry, key, limit, trace=None):
    payload = payload_for_sealed(entry.size)
    if payload > limit:
        raise Reject(f"{entry.name}: {payload} bytes (at most {limit})")
    buf = bytearray()
    open_stream(f, entry, key, payload, buf.extend, trace)
    return bytes(buf)


def parse_root(data, mode, deps):
    """§10.6."""
    b = Bin(data, "root")
    if b.take(5) != b"N11R\x01":
        raise Reject("root: not a manifest root")
    kind = b.take(1)[0]
    if kind == 1:
        holder = b.int(deps, "holder")
        if holder == 0:
            raise Reject("root: the same manifest as itself")
        digest = b.take(32)
        b.end()
        return {"same_as": holder, "sha256": digest}
    if kind != 0:
        raise Reject(f"root: kind {kind}")
    keys, last = {}, -1
    for _ in range(b.int(3 if mode == "secure" else 0, "vault key count")):
        c = b.take(1)[0]
        if c > 2 or c <= last:
            raise Reject("root: vault keys out of order")
        last = c
        keys[("vault", "fade", "backup")[c]] = b.take(16)
    item_count = b.int(MAX_PAGES * PAGE_MAX_ITEMS, "item count")
    plaintext_bytes = b.int((1 << 63) - 1, "plaintext bytes")
    descriptors, total = [], 0
    for _ in range(b.int(MAX_PAGES, "page count")):
        d = {"first": b.take(16), "count": b.int(PAGE_MAX_ITEMS, "page item count"),
             "holder": b.int(deps, "page holder"), "page": b.int(MAX_PAGES - 1, "page number"),
             "length": b.int(PAGE_MAX_BYTES, "page length"), "sha256": b.take(32)}
        if d["count"] == 0:
            raise Reject("root: a page without items")
        if descriptors and descriptors[-1]["first"] >= d["first"]:
            raise Reject("root: pages out of order")
        descriptors.append(d)
        total += d["count"]
    b.end()
    if total != item_count:
        raise Reject(f"root: the pages hold {total} items, not {item_count}")
    return {"keys": keys, "items": item_count, "bytes": plaintext_bytes, "pages": descriptors}


def parse_page(data, mode, deps, what):
    """§10.4."""
    if len(data) > PAGE_MAX_BYTES:
        raise Reject(f"{what}: {len(data)} bytes (at most {PAGE_MAX_BYTES})")
    b = Bin(data, what)
    if b.take(5) != b"N11P\x01":
        raise Reject(f"{what}: not a manifest page")
    count = b.int(PAGE_MAX_ITEMS, "item count")
    if count == 0:
        raise Reject(f"{what}: a page without items")
    records = []
    for _ in range(count):
        r = {"id": b.take(16)}
        flags = b.take(1)[0]
        if flags & 0xF0 or (flags >> 1) & 3 == 3:
            raise Reject(f"{what}: item flags {flags}")
        r["kind"] = "note" if flags & 1 else "photo"
        r["compartment"] = ("vault", "fade", "backup")[(flags >> 1) & 3]
        r["size"] = b.int(ITEM_SIZE_MAX, "size")
        r["sha256"] = b.take(32)
        r["created"] = b.signed(*ITEM_TIMES, "created")
        r["expires"] = b.signed(*ITEM_TIMES, "expires") if flags & 8 else None
        if (r["compartment"] == "fade") != (r["expires"] is not None):
            raise Reject(f"{what}: item {canonical_id(r['id'])}: an expiry goes with fade items only")
        name = b.take(b.int(255, "name length"))
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            raise Reject(f"{what}: item {canonical_id(r['id'])}: name is not UTF-8")
        if not name or b"/" in name or b"\0" in name:
            raise Reject(f"{what}: item {canonical_id(r['id'])}: name must be 1...255 bytes without '/' or NUL")
        r["name"] = text
        r["holder"] = b.int(deps, "holder")
        r["pack"] = b.int((1 << 32) - 1, "pack")
        r["offset"] = b.int(PACK_OFFSET_MAX, "offset")
        r["payloadSize"] = r["size"] + (0 if mode == "portable" else SECURE_OVERHEAD)
        if r["offset"] + r["payloadSize"] > PACK_OFFSET_MAX:
            raise Reject(f"{what}: item {canonical_id(r['id'])} ends past a pack's bound")
        if records and records[-1]["id"] >= r["id"]:
            raise Reject(f"{what}: item {canonical_id(r['id'])} is not after the one before it")
        records.append(r)
    b.end()
    return records


def open_v3_head(f, file_size):
    """§10.7 steps 1-2: layout, header, signature (before any slot)."""
    entries = read_zip_layout(f, file_size, v3=True)
    layout = v3_layout(entries)
    hdr_e, mac_e = entries[0], entries[1]
    if hdr_e.size > HEADER_MAX_V3:
        raise Reject(f"header.json is {hdr_e.size} bytes (at most {HEADER_MAX_V3})")
    header_bytes = read_entry(f, hdr_e)
    header = parse_header(header_bytes)
    if header["version"] != 3:
        raise Reject(f"a version {header['version']} header in a version 3 layout")
    if mac_e.size != HEADER_MAC_LEN:
        raise Reject(f"header.mac is {mac_e.size} bytes (must be {HEADER_MAC_LEN})")
    # §10.3: the signature, before any slot.
    sig_e = layout["sig"]
    if ("_signer" in header) != (sig_e is not None):
        raise Reject("a signer without header.sig, or header.sig without a signer")
    if sig_e is not None:
        if sig_e.size != 64:
            raise Reject(f"header.sig is {sig_e.size} bytes (must be 64)")
        if not ed25519_verifies(header["_signer"], read_entry(f, sig_e), SIGNATURE_CONTEXT + header_bytes):
            raise Reject("header.sig does not verify")
    return {"f": f, "layout": layout, "header": header, "header_bytes": header_bytes, "mac_e": mac_e, "sig_e": sig_e}


class MissingDependency(Reject):
    """§10.11: a dependency not found beside the archive (not damage: n11archive exits 66)."""


def open_dependencies(args, main):
    """§10.11: each archive dependsOn names, found beside the archive by the archiveId in its
    header (never by name), checked, and opened with the same secrets. Returns, per
    dependency, its head and content key."""
    header = main["header"]
    directory = os.path.dirname(os.path.abspath(args.archive))

    def dated_order(name):
        # The bare dated name first, then -2, -3, ... (as prune counts one file per ID).
        m = re.fullmatch(r"n11archive-\d{8}T\d{6}Z(?:-(\d+))?\.nu11vlt", name)
        return (int(m.group(1) or 1) if m else 1, name)

    found = {}
    for name in sorted(os.listdir(directory), key=dated_order):
        path = os.path.join(directory, name)
        if not name.endswith(".nu11vlt") or name.startswith(".") or os.path.islink(path) or not os.path.isfile(path) \
                or os.stat(path).st_uid != os.geteuid() or os.path.samefile(path, args.archive):
            continue
        g = open(path, "rb")
        try:
            head = open_v3_head(g, os.fstat(g.fileno()).st_size)
        except Reject:
            g.close()
            continue
        found.setdefault(head["header"]["_archiveId"], []).append(head)
    deps = []
    for aid in header["_dependsOn"]:
        # Every file that claims the ID is tried, in that order: the first that is it wins.
        refusal = None
        for head in found.get(aid, []):
            h = head["header"]
            try:
                if h["mode"] != header["mode"] or h["created"][:19] > header["created"][:19] or header["_archiveId"] in h["_dependsOn"]:
                    raise Reject(f"archive {aid.hex()} is not an older archive of the same mode that does not depend back")
                head["ck"] = open_content_key(args, h, head["header_bytes"], read_entry(head["f"], head["mac_e"]))
                deps.append(head)
                break
            except Reject as e:
                refusal = refusal or e
        else:
            if refusal:
                raise refusal
            raise MissingDependency(f"missing dependency: archive {aid.hex()} is not beside the archive")
    return deps


def run_v3(args, f, file_size):
    """§10.7 in order (§10.11 for an incremental archive)."""
    global STAGE
    out = []
    main = open_v3_head(f, file_size)
    layout, header, header_bytes, sig_e = main["layout"], main["header"], main["header_bytes"], main["sig_e"]
    if header["mode"] == "secure":
        raise SecureArchive()
    if header["_dependsOn"] and args.explain:
        raise Reject("--explain reads full archives only")

    STAGE = "key"
    mac = read_entry(f, main["mac_e"])
    ck = open_content_key(args, header, header_bytes, mac)
    main["ck"] = ck
    deps = open_dependencies(args, main) if header["_dependsOn"] else []
    archives = [main] + deps   # 0: the archive, k: dependsOn[k-1]

    def renumber(h, a):
        """holder h as numbered by archive a, in the archive's own numbering."""
        if h == 0:
            return a
        if a == 0:
            return h
        aid = archives[a]["header"]["_dependsOn"][h - 1]
        if aid not in header["_dependsOn"]:
            raise Reject(f"archive {archives[a]['header']['archiveId']} refers to {aid.hex()}, which dependsOn does not list")
        return header["_dependsOn"].index(aid) + 1

    def key_of(a, name):
        return entry_key(archives[a]["ck"], archives[a]["header"]["_archiveId"], name)

    STAGE = "manifest"
    aid = header["_archiveId"]
    root_key = entry_key(ck, aid, "Manifest/root.n11")
    rtrace = {}
    root_bytes = read_sealed(f, layout["root"], root_key, MANIFEST_MAX, rtrace)
    root = parse_root(root_bytes, header["mode"], len(header["_dependsOn"]))
    list_holder = 0
    if "same_as" in root:
        k = root["same_as"]
        other = archives[k]
        text = read_sealed(other["f"], other["layout"]["root"], key_of(k, "Manifest/root.n11"), MANIFEST_MAX)
        if hashlib.sha256(text).digest() != root["sha256"]:
            raise Reject(f"root: archive {other['header']['archiveId']}'s root is not the one named")
        root = parse_root(text, header["mode"], len(other["header"]["_dependsOn"]))
        if "same_as" in root:
            raise Reject("root: a root names a root that names another")
        list_holder = k
    records, page_of, holders, page_texts, own_pages = [], [], [], [], 0
    for n, d in enumerate(root["pages"]):
        ph = renumber(d["holder"], list_holder)
        if ph == 0:
            if d["page"] != own_pages:
                raise Reject(f"page {n} is not where the root puts it")
            own_pages += 1
        pages = archives[ph]["layout"]["pages"]
        if d["page"] >= len(pages):
            raise Reject(f"page {n} is missing")
        text = read_sealed(archives[ph]["f"], pages[d["page"]], key_of(ph, f"Manifest/{d['page']}.n11page"), PAGE_MAX_BYTES)
        if len(text) != d["length"] or hashlib.sha256(text).digest() != d["sha256"]:
            raise Reject(f"page {n} is not the page the root lists")
        page = parse_page(text, header["mode"], len(archives[ph]["header"]["_dependsOn"]), f"page {n}")
        if len(page) != d["count"] or page[0]["id"] != d["first"]:
            raise Reject(f"page {n} does not hold the items the root lists")
        if records and records[-1]["id"] >= page[0]["id"]:
            raise Reject(f"page {n} does not follow the page before it")
        for r in page:
            holders.append(renumber(r["holder"], ph))
        records += page
        page_of += [d["page"] if ph == 0 else -1] * len(page)
        page_texts.append(text)
    if own_pages != len(layout["pages"]):
        raise Reject(f"root lists {own_pages} of the archive's pages, it holds {len(layout['pages'])}")
    if sum(r["size"] for r in records) != root["bytes"]:
        raise Reject("root: plaintextBytes is not the sum of the items' sizes")
    # §10.5: the archive's own items fill its packs in order.
    by_pack, expected, filled = [], 0, 0
    for r, n, h in zip(records, page_of, holders):
        if h != 0:
            packs = archives[h]["layout"]["packs"]
            if r["pack"] >= len(packs) or r["offset"] + r["payloadSize"] > payload_for_sealed(packs[r["pack"]].size):
                raise Reject(f"item {canonical_id(r['id'])} is not in archive {archives[h]['header']['archiveId']}'s pack {r['pack']}")
            continue
        if not by_pack or by_pack[-1][0] != r["pack"]:
            if r["pack"] != expected or r["offset"] != 0:
                raise Reject(f"item {canonical_id(r['id'])} is not where the packs continue")
            by_pack.append((r["pack"], [], n))
            expected += 1
            filled = 0
        pack, items, page_n = by_pack[-1]
        if r["offset"] != filled:
            raise Reject(f"item {canonical_id(r['id'])} does not start where the item before it ended")
        filled += r["payloadSize"]
        items.append(r)
        if pack >= len(layout["packs"]) or layout["page_of_pack"][pack] != n:
            raise Reject(f"item {canonical_id(r['id'])} is in a pack that does not follow its page")
    if expected != len(layout["packs"]):
        raise Reject(f"{len(layout['packs']) - expected} pack(s) hold no item")
    for pack, items, _ in by_pack:
        if payload_for_sealed(layout["packs"][pack].size) != sum(i["payloadSize"] for i in items):
            raise Reject(f"pack {pack} does not hold exactly its items")

    if args.explain:
        out += explain_v3(header_bytes, header, args, mac, ck, root_key, rtrace, root_bytes, page_texts)

    # §10.7 step 7: each pack decrypted in order; each item's bytes checked.
    STAGE = "payload"
    stage = None
    if args.export:
        os.makedirs(args.export, exist_ok=True)
        stage = tempfile.mkdtemp(prefix=".format-reference-", dir=args.export)

    def keep(it, data):
        if stage:
            fd = os.open(os.path.join(stage, canonical_id(it["id"])), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as dst:
                dst.write(data)

    try:
        total = 0
        for pack, items, _ in by_pack:
            entry = layout["packs"][pack]
            key = entry_key(ck, aid, f"Packs/{pack}.n11pack")
            queue = collections.deque(items)
            state = {"digest": hashlib.sha256(), "left": queue[0]["payloadSize"], "held": bytearray()}

            def finish_item():
                it = queue.popleft()
                if state["digest"].digest() != it["sha256"]:
                    raise Reject(f"item {canonical_id(it['id'])}: SHA-256 differs from the manifest")
                keep(it, state["held"])
                if args.explain:
                    out.extend(explain_v3_item(it, key if it is items[0] else None, bytes(state["held"])))
                state["digest"], state["held"] = hashlib.sha256(), bytearray()
                state["left"] = queue[0]["payloadSize"] if queue else 0

            def sink(pt):
                view = memoryview(pt)
                while True:
                    while queue and state["left"] == 0:
                        finish_item()
                    if not view:
                        return
                    take = min(len(view), state["left"])
                    state["digest"].update(view[:take])
                    if stage or args.explain:
                        state["held"].extend(view[:take])
                    state["left"] -= take
                    view = view[take:]

            open_stream(f, entry, key, payload_for_sealed(entry.size), sink)
            while queue:
                finish_item()
            total += sum(i["size"] for i in items)
        # §10.11 step 7: an item held by a dependency, from that archive's pack, under its keys.
        opened = {}
        for r, h in zip(records, holders):
            if h == 0:
                continue
            if (h, r["pack"]) not in opened:
                entry = archives[h]["layout"]["packs"][r["pack"]]
                buf = bytearray()
                open_stream(archives[h]["f"], entry, key_of(h, f"Packs/{r['pack']}.n11pack"), payload_for_sealed(entry.size), buf.extend)
                opened = {(h, r["pack"]): bytes(buf)}
            data = opened[(h, r["pack"])][r["offset"]:r["offset"] + r["payloadSize"]]
            if len(data) != r["payloadSize"] or hashlib.sha256(data).digest() != r["sha256"]:
                raise Reject(f"item {canonical_id(r['id'])}: SHA-256 differs from the manifest")
            keep(r, data)
            total += r["size"]
        if stage:
            for r in records:
                os.rename(os.path.join(stage, canonical_id(r["id"])), os.path.join(args.export, canonical_id(r["id"])))
    finally:
        if stage:
            shutil.rmtree(stage, ignore_errors=True)
        for d in deps:
            d["f"].close()
    if args.explain:
        print("\n".join(out))
    print(f"OK: portable version 3 archive {header['archiveId']}, {len(records)} item(s) in {len(root['pages'])} page(s) "
          f"and {len(layout['packs'])} pack(s), {total} bytes of content, every tag, size and SHA-256 verified"
          + (f", reading {len(deps)} archive(s) it depends on" if deps else "")
          + (f", signed by {header['signer']}" if sig_e is not None else "")
          + (f", exported to {args.export}" if args.export else ""),
          file=sys.stderr if args.explain else sys.stdout)


def explain_v3(header_bytes, header, args, mac, ck, root_key, rtrace, root_bytes, pages):
    lines = explain_head_v2(header_bytes, header, args, mac, ck, root_key, rtrace)
    lines[0] = "### Version 3 worked example values"
    lines = [l.replace("entry key of `manifest.json`", "entry key of `Manifest/root.n11`")
              .replace("`manifest.json` chunk 0", "`Manifest/root.n11` chunk 0")
              .replace("`header.mac` and manifest", "`header.mac` and root") for l in lines]
    root = parse_root(root_bytes, header["mode"], 0)
    lines += ["#### Root (`Manifest/root.n11` plaintext)", "", "| quantity | value |", "|---|---|",
              f"| root plaintext ({len(root_bytes)} bytes) | `{root_bytes.hex()}` |",
              f"| magic, version, kind (page list), keyCount | `{root_bytes[:7].hex()}` |",
              f"| itemCount, plaintextBytes, pageCount | {root['items']}, {root['bytes']}, {len(root['pages'])} |"]
    for n, d in enumerate(root["pages"]):
        lines.append(f"| descriptor {n}: firstID, itemCount, holder, page, length, SHA-256 | `{d['first'].hex()}`, "
                     f"{d['count']}, {d['holder']}, {d['page']}, {d['length']}, `{d['sha256'].hex()}` |")
    lines.append("")
    for n, text in enumerate(pages):
        lines += [f"#### Page {n} (`Manifest/{n}.n11page` plaintext)", "", "| quantity | value |", "|---|---|",
                  f"| page plaintext ({len(text)} bytes) | `{text.hex()}` |"]
        for r in parse_page(text, header["mode"], 0, f"page {n}"):
            lines.append(f"| record `{canonical_id(r['id'])}`: kind, compartment, size, created (ms), name, holder, pack, offset | "
                         f"{r['kind']}, {r['compartment']}, {r['size']}, {r['created']}, `{r['name']}`, {r['holder']}, "
                         f"{r['pack']}, {r['offset']} |")
        lines.append("")
    return lines


def explain_v3_item(it, pack_key, plaintext):
    lines = [f"#### Item `{canonical_id(it['id'])}` ({it['kind']}, `{it['name']}`)", "", "| quantity | value |", "|---|---|",
             f"| pack, offset | {it['pack']}, {it['offset']} |"]
    if pack_key is not None:
        lines.append(f"| entry key of `Packs/{it['pack']}.n11pack` | `{pack_key.hex()}` |")
    lines += [f"| plaintext size | {it['size']} bytes |", f"| plaintext SHA-256 | `{it['sha256'].hex()}` |"]
    try:
        text = plaintext.decode("utf-8") if len(plaintext) <= 4096 else None
    except UnicodeDecodeError:
        text = None
    if text is not None and not any(ord(c) < 32 and c not in "\n\t" for c in text):
        lines.append(f"| plaintext (as a JSON string) | `{json.dumps(text, ensure_ascii=False)}` |")
    else:
        lines.append("| plaintext | (binary or large; not shown) |")
    return lines + [""]


# ---------------------------------------------------------------- --explain output

def explain_head(header_bytes, header, kek, keywrap, ck, mkey, mtrace):
    k = header["kdf"]
    return [
        "### Worked example values", "",
        "#### `header.json` (exact bytes, "
        f"{len(header_bytes)} bytes; the associated data of the key wrap)", "",
        "```json", header_bytes.decode("utf-8"), "```", "",
        "#### Key derivation and key wrap", "",
        "| quantity | value |", "|---|---|",
        f"| archive ID (HKDF salt) | `{header['archiveId']}` |",
        f"| Argon2id salt | `{k['salt']}` |",
        f"| Argon2id parameters | t = {k['opsLimit']}, m = {k['memoryKiB']} KiB, p = "
        f"{k['parallelism']}, version 0x13, 32-byte output |",
        f"| KEK | `{kek.hex()}` |",
        f"| keywrap nonce (`keywrap.bin[0:12]`) | `{keywrap[:12].hex()}` |",
        f"| keywrap tag (`keywrap.bin[44:60]`) | `{keywrap[44:].hex()}` |",
        f"| content key (CK) | `{ck.hex()}` |",
        f"| entry key of `manifest.json` | `{mkey.hex()}` |",
        f"| `manifest.json` chunk 0 nonce | `{mtrace['nonce'].hex()}` |",
        f"| `manifest.json` chunk 0 tag | `{mtrace['tag'].hex()}` |",
        "",
    ]


def explain_head_v2(header_bytes, header, args, mac, ck, mkey, mtrace):
    """Every slot's derivation that the given password and identity allow, then header.mac."""
    archive_id = header["_archiveId"]
    lines = [
        "### Worked example values (version 2)", "",
        f"#### `header.json` (exact bytes, {len(header_bytes)} bytes; the message of `header.mac`)", "",
        "```json", header_bytes.decode("utf-8"), "```", "",
    ]
    password = read_password(args.password_file) if args.password_file else None
    identity = load_identity(args.identity, getattr(args, "passphrase_file", None)) if getattr(args, "identity", None) else None
    for n, slot in enumerate(header["slots"]):
        w = slot["_wrap"]
        lines += [f"#### Slot {n} (`{slot['type']}`)", "", "| quantity | value |", "|---|---|"]
        if slot["type"] == "password":
            k = slot["kdf"]
            lines += [f"| Argon2id salt | `{k['salt']}` |",
                      f"| Argon2id parameters | t = {k['opsLimit']}, m = {k['memoryKiB']} KiB, p = 1, version 0x13, 32-byte output |"]
            if password is not None:
                lines.append(f"| KEK (Argon2id of the password) | `{derive_kek(password, k).hex()}` |")
            lines += [f"| AES-256-GCM associated data | `{(SLOT_AAD + archive_id).hex()}` (`n11archive/v2/slot` ‖ archive ID) |",
                      f"| wrap nonce (`wrap[0:12]`) | `{w[:12].hex()}` |",
                      f"| wrap tag (`wrap[44:60]`) | `{w[44:].hex()}` |"]
        elif slot["type"] == "p256":
            lines.append(f"| ephemeral public key E (`wrap[0:65]`) | `{w[:65].hex()}` |")
            if identity is not None:
                peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), w[:65])
                z = identity.exchange(ec.ECDH(), peer)
                k = X963KDF(algorithm=hashes.SHA256(), length=16, sharedinfo=w[:65]).derive(z)
                mine = identity.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
                scalar = identity.private_numbers().private_value.to_bytes(32, "big")
                lines += [f"| recipient private key (the committed test identity's scalar) | `{scalar.hex()}` |",
                          f"| recipient public key R | `{mine.hex()}` |",
                          f"| shared secret Z (x of the identity's scalar · E) | `{z.hex()}` |",
                          f"| K = X9.63-KDF-SHA256(Z, SharedInfo = E), 16 bytes | `{k.hex()}` |",
                          "| AES-128-GCM IV | `00000000000000000000000000000000` (16 zero bytes) |"]
            lines.append(f"| wrap tag (`wrap[97:113]`) | `{w[97:].hex()}` |")
        else:
            lines += [f"| wrap nonce (`wrap[0:12]`) | `{w[:12].hex()}` |", f"| wrap tag (`wrap[44:60]`) | `{w[44:].hex()}` |"]
        lines.append("")
    mac_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=archive_id, info=HEADER_MAC_INFO).derive(ck)
    lines += ["#### Content key, `header.mac` and manifest", "", "| quantity | value |", "|---|---|",
              f"| archive ID (HKDF salt) | `{header['archiveId']}` |",
              f"| content key (CK), from any slot | `{ck.hex()}` |",
              f"| header MAC key = HKDF-SHA256(CK, salt = archive ID, info = `n11archive/v2/header`) | `{mac_key.hex()}` |",
              f"| `header.mac` = HMAC-SHA256(MAC key, header.json) | `{mac.hex()}` |",
              f"| entry key of `manifest.json` | `{mkey.hex()}` |",
              f"| `manifest.json` chunk 0 nonce | `{mtrace['nonce'].hex()}` |",
              f"| `manifest.json` chunk 0 tag | `{mtrace['tag'].hex()}` |", ""]
    return lines


def explain_item(n, name, key, trace, it, plaintext):
    lines = [f"#### Item {n + 1}: `{name}`", "",
             "| quantity | value |", "|---|---|",
             f"| entry key | `{key.hex()}` |",
             f"| chunk 0 nonce | `{trace['nonce'].hex()}` |",
             f"| chunk 0 tag | `{trace['tag'].hex()}` |",
             f"| plaintext size | {it['size']} bytes |",
             f"| plaintext SHA-256 | `{it['sha256']}` |"]
    text = None
    if plaintext is not None:
        try:
            text = plaintext.decode("utf-8")
            if any(ord(c) < 32 and c not in "\n\t" for c in text):
                text = None
        except UnicodeDecodeError:
            text = None
    if text is not None:
        lines.append(f"| plaintext (as a JSON string) | `{json.dumps(text, ensure_ascii=False)}` |")
    else:
        lines.append("| plaintext | (binary or large; not shown) |")
    lines.append("")
    return lines


# ---------------------------------------------------------------- main

class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


# ---------------------------------------------------------------- Appendix B: key store

KEYSTORE_MAGIC = b"N11KEYS\0"
KEYSTORE_RECORD = 49


def check_keystore(path):
    """Appendix B's checks that need no PIN: the header, the Argon2id bounds and the checksum
    of a sealed store (checked before any PIN would be asked for), and the whole body of an
    unsealed one. Returns a one-line description; raises Reject."""
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    if len(data) < 10 or data[:8] != KEYSTORE_MAGIC:
        raise Reject("not a key store (no N11KEYS magic)")
    version, protection = data[8], data[9]
    if version not in (1, 2, 3):
        raise Reject(f"key store version {version} is not known")
    if protection == 2:
        if len(data) < 10 + 24 + 12 + 16 + 32 or hashlib.sha256(data[:-32]).digest() != data[-32:]:
            raise Reject("the key store's checksum does not match")
        ops, mem = struct.unpack_from("<II", data, 10)
        if not OPS_RANGE[0] <= ops <= OPS_RANGE[1] or not MEM_RANGE[0] <= mem <= MEM_RANGE[1]:
            raise Reject(f"the key store's Argon2id cost (t = {ops}, m = {mem} KiB) is out of bounds")
        return f"sealed key store (t = {ops}, m = {mem} KiB); its records need the PIN"
    if protection != 0:
        raise Reject(f"protection {protection} is not read here")
    if hashlib.sha256(data[:-32]).digest() != data[-32:]:
        raise Reject("the key store's checksum does not match")
    body = data[10:-32]
    if len(body) < 20:
        raise Reject("the key store's body is truncated")
    count = struct.unpack_from("<I", body, 16)[0]
    if len(body) != 20 + count * KEYSTORE_RECORD:
        raise Reject("the key store's body has the wrong size")
    current, pending, devices, signing = {}, {}, set(), 0
    for i in range(count):
        r = body[20 + i * KEYSTORE_RECORD:20 + (i + 1) * KEYSTORE_RECORD]
        kind, rid = r[0], r[1:17]
        if kind == 0 or kind > 16 or (version == 1 and kind > 5) or (version == 2 and kind > 14):
            raise Reject(f"record {i}: kind {kind} is not known")
        if kind == 16:
            raise Reject(f"record {i}: a trusted signer (kind 16) in a key store; only a key backup, always sealed, holds them")
        if kind == 15:
            # A signing key's seed, named by the first 16 bytes of its public key's SHA-256.
            public = Ed25519PrivateKey.from_private_bytes(r[17:49]).public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            if hashlib.sha256(public).digest()[:16] != rid:
                raise Reject(f"record {i}: the id of a signing key does not name its public key")
            signing += 1
            if signing > 1:
                raise Reject(f"record {i}: a second signing key")
        if kind in (1, 2, 3):
            if any(rid):
                raise Reject(f"record {i}: a current key's id is not zero")
            current[kind] = current.get(kind, 0) + 1
        elif kind in (9, 10, 11):
            pending[kind] = pending.get(kind, 0) + 1
        elif kind == 4:
            if rid in devices:
                raise Reject(f"record {i}: a second device key for archive {rid.hex()}")
            devices.add(rid)
    if any(current.get(k, 0) != 1 for k in (1, 2, 3)) or any(n > 1 for n in pending.values()):
        raise Reject("a compartment without exactly one current key, or with two pending ones")
    return f"unsealed key store, {count} records, {len(devices)} device key(s)"


def run_keystore_testkit(directory):
    """Each NAME.n11keys in `directory` against the `expect:` line (`success` or `refused`)
    of NAME.txt; returns the number that differ."""
    names = sorted(n[:-len(".n11keys")] for n in os.listdir(directory) if n.endswith(".n11keys"))
    mismatches = 0
    for name in names:
        with open(os.path.join(directory, name + ".txt"), encoding="utf-8") as f:
            fields = dict(line.rstrip("\n").partition(": ")[::2] for line in f)
        try:
            outcome, why = "success", check_keystore(os.path.join(directory, name + ".n11keys"))
        except Reject as e:
            outcome, why = "refused", str(e)
        ok = outcome == fields.get("expect")
        mismatches += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {outcome} ({why})", file=sys.stdout if ok else sys.stderr)
    print(f"{len(names) - mismatches} of {len(names)} key store fixtures as expected")
    return mismatches if names else 1


def outcome_of(args):
    """Reads one archive quietly: `success`, `missing dependency`, or the stage that refused it."""
    try:
        with open(os.devnull, "w") as quiet:
            saved, sys.stdout = sys.stdout, quiet
            try:
                run(args)
            finally:
                sys.stdout = saved
        return "success", ""
    except MissingDependency as e:
        return "missing dependency", str(e)
    except Reject as e:
        return f"{STAGE} failure", str(e)


def run_incremental_testkit(directory):
    """Each case directory's case.txt lines `NAME: OUTCOME`, read with the golden password;
    returns the number of archives whose outcome differs."""
    password = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../Fixtures/golden/portable-v1.password")
    checked = mismatches = 0
    for case in sorted(os.listdir(directory)):
        with open(os.path.join(directory, case, "case.txt"), encoding="utf-8") as f:
            lines = [line.rstrip("\n").partition(": ") for line in f if line.strip()]
        for name, _, expect in lines:
            checked += 1
            outcome, why = outcome_of(argparse.Namespace(archive=os.path.join(directory, case, name), password_file=password,
                                                         identity=None, passphrase_file=None, export=None, explain=False))
            ok = outcome == expect
            mismatches += 0 if ok else 1
            print(f"{'ok  ' if ok else 'FAIL'} {case}/{name}: {outcome}" + (f" ({why})" if why else ""), file=sys.stdout if ok else sys.stderr)
    print(f"{checked - mismatches} of {checked} incremental archives as expected")
    return mismatches


def run_testkit(directory):
    """Runs every NAME.nu11vlt in `directory` against the `expect:` line of NAME.txt; returns
    the number of fixtures whose outcome differs."""
    names = sorted(n[:-len(".nu11vlt")] for n in os.listdir(directory) if n.endswith(".nu11vlt"))
    if not names:
        print(f"format-reference: no fixtures in {directory}", file=sys.stderr)
        return 1
    mismatches = 0
    for name in names:
        fields = {}
        with open(os.path.join(directory, name + ".txt"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition(": ")
                fields[key] = value
        expect = fields.get("expect")
        if expect is None:
            print(f"FAIL {name}: no 'expect:' line", file=sys.stderr)
            mismatches += 1
            continue
        args = argparse.Namespace(archive=os.path.join(directory, name + ".nu11vlt"),
                                  password_file=os.path.join(directory, fields["password-file"]) if "password-file" in fields else None,
                                  identity=os.path.join(directory, fields["identity"]) if "identity" in fields else None,
                                  passphrase_file=None, export=None, explain=False)
        outcome, why = outcome_of(args)
        if outcome == expect:
            print(f"ok   {name}: {outcome}" + (f" ({why})" if why else ""))
        else:
            print(f"FAIL {name}: expected {expect}, got {outcome}" + (f" ({why})" if why else ""), file=sys.stderr)
            mismatches += 1
    print(f"{len(names) - mismatches} of {len(names)} fixtures as expected")
    return mismatches


def main(argv=None):
    p = Parser(description="Reference reader for portable .nu11vlt archives "
                           "(written from FORMAT.md alone).")
    p.add_argument("archive", metavar="ARCHIVE", nargs="?")
    p.add_argument("--keystore-testkit", metavar="DIR",
                   help="check every NAME.n11keys in DIR against NAME.txt's 'expect:' (Appendix B)")
    p.add_argument("--incremental-testkit", metavar="DIR",
                   help="read every archive each DIR/CASE/case.txt names and check its outcome (§10.11)")
    p.add_argument("--testkit", metavar="DIR",
                   help="run every fixture in DIR (NAME.nu11vlt with NAME.txt's 'expect:' line) and "
                        "exit non-zero if any outcome differs")
    p.add_argument("--password-file", metavar="FILE",
                   help="the password is the first line of FILE, without its newline "
                        "(required for portable archives)")
    p.add_argument("--identity", metavar="PEM",
                   help="a P-256 private key (PEM) that may open a version 2 archive's p256 slots")
    p.add_argument("--passphrase-file", metavar="FILE",
                   help="the identity's passphrase, if it is encrypted (first line of FILE)")
    p.add_argument("--export", metavar="DIR",
                   help="write each item's plaintext to DIR/<id> after everything verified")
    p.add_argument("--explain", action="store_true",
                   help="print the worked-example values (Markdown)")
    args = p.parse_args(argv)
    if args.testkit:
        return EXIT_FAIL if run_testkit(args.testkit) else EXIT_OK
    if args.keystore_testkit:
        return EXIT_FAIL if run_keystore_testkit(args.keystore_testkit) else EXIT_OK
    if args.incremental_testkit:
        return EXIT_FAIL if run_incremental_testkit(args.incremental_testkit) else EXIT_OK
    if args.archive is None:
        p.error("give ARCHIVE (or --testkit DIR)")
    try:
        run(args)
    except SecureArchive:
        print("secure archive: needs the device key, not supported by this reader",
              file=sys.stderr)
        return EXIT_SECURE
    except Reject as e:
        print(f"format-reference: REJECTED: {e}", file=sys.stderr)
        return EXIT_FAIL
    except MemoryError:
        print("format-reference: REJECTED: out of memory", file=sys.stderr)
        return EXIT_FAIL
    except OSError as e:
        print(f"format-reference: I/O error: {e}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
