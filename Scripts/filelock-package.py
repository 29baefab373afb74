#!/usr/bin/env python3
"""An independent FileLock package writer and reader, written from the description in
issue 13 and seed 000 (not from n11archive's sources), with Python's `cryptography`.

A package is four chunks, each after its length as a big-endian UInt32:
  1. the 32-byte AES key wrapped with Apple's eciesEncryptionCofactorX963SHA256AESGCM:
     ephemeral P-256 point (04||X||Y) || AES-128-GCM(key = X9.63-KDF-SHA256(Z, SharedInfo =
     ephemeral point)[0:16], IV = 16 zero bytes, no AAD) of the key || 16-byte tag
  2. the 12-byte nonce
  3. the AES-256-GCM ciphertext of the file
  4. the 16-byte GCM tag

Usage:
  filelock-package.py seal PUBLIC_KEY.pem IN OUT     (FileLock raw-point PEM or SPKI PEM)
  filelock-package.py open PRIVATE_KEY.pem PASSPHRASE_FILE IN OUT
"""
import base64
import os
import struct
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.x963kdf import X963KDF


def load_public(path):
    text = open(path, "rb").read()
    body = b"".join(l.strip() for l in text.splitlines() if l.strip() and not l.startswith(b"-----"))
    raw = base64.b64decode(body)
    if len(raw) == 65:
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    return serialization.load_der_public_key(raw)


def ecies_key(shared, ephemeral_point):
    return X963KDF(algorithm=hashes.SHA256(), length=16, sharedinfo=ephemeral_point).derive(shared)


def seal(public_path, src, dst):
    recipient = load_public(public_path)
    ephemeral = ec.generate_private_key(ec.SECP256R1())
    point = ephemeral.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    kek = ecies_key(ephemeral.exchange(ec.ECDH(), recipient), point)
    file_key = os.urandom(32)
    wrapped = point + AESGCM(kek).encrypt(b"\0" * 16, file_key, None)
    nonce = os.urandom(12)
    sealed = AESGCM(file_key).encrypt(nonce, open(src, "rb").read(), None)
    ciphertext, tag = sealed[:-16], sealed[-16:]
    with open(dst, "wb") as out:
        for part in (wrapped, nonce, ciphertext, tag):
            out.write(struct.pack(">I", len(part)) + part)


def unseal(private_path, passphrase_path, src, dst):
    passphrase = open(passphrase_path, "rb").read().split(b"\n")[0]
    key = serialization.load_pem_private_key(open(private_path, "rb").read(), password=passphrase)
    data = open(src, "rb").read()
    parts, pos = [], 0
    for _ in range(4):
        (n,) = struct.unpack_from(">I", data, pos)
        parts.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    if pos != len(data):
        raise SystemExit("trailing bytes")
    wrapped, nonce, ciphertext, tag = parts
    point = wrapped[:65]
    peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    kek = ecies_key(key.exchange(ec.ECDH(), peer), point)
    file_key = AESGCM(kek).decrypt(b"\0" * 16, wrapped[65:], None)
    open(dst, "wb").write(AESGCM(file_key).decrypt(nonce, ciphertext + tag, None))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "seal":
        seal(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "open":
        unseal(*sys.argv[2:])
    else:
        raise SystemExit(__doc__)
