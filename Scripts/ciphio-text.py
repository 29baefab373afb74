#!/usr/bin/env python3
"""An independent Ciphio text message writer and reader (seed 002), with Python's
`cryptography`, written from the seed's description: `ALG:BASE64(salt16 + iv + ciphertext)`,
PBKDF2-HMAC-SHA256 with 100,000 iterations and a 32-byte key; GCM with a 12-byte IV (tag
appended), CBC (PKCS#7) and CTR with 16-byte IVs.

Usage: ciphio-text.py encrypt ALG PASSWORD_FILE < text > message
       ciphio-text.py decrypt PASSWORD_FILE < message > text
"""
import base64
import os
import sys

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC


def key(password, salt):
    return PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=100_000).derive(password)


def read_password(path):
    line = open(path, "rb").read().split(b"\n")[0]
    return line[:-1] if line.endswith(b"\r") else line


def encrypt(alg, password, text):
    salt = os.urandom(16)
    k = key(password, salt)
    if alg == "gcm":
        iv = os.urandom(12)
        ct = AESGCM(k).encrypt(iv, text, None)
    elif alg == "cbc":
        iv = os.urandom(16)
        padder = padding.PKCS7(128).padder()
        data = padder.update(text) + padder.finalize()
        e = Cipher(algorithms.AES(k), modes.CBC(iv)).encryptor()
        ct = e.update(data) + e.finalize()
    else:
        iv = os.urandom(16)
        e = Cipher(algorithms.AES(k), modes.CTR(iv)).encryptor()
        ct = e.update(text) + e.finalize()
    return alg + ":" + base64.b64encode(salt + iv + ct).decode()


def decrypt(password, message):
    alg, _, body = message.strip().rpartition(":")
    alg = alg or "gcm"
    raw = base64.b64decode(body)
    salt, rest = raw[:16], raw[16:]
    k = key(password, salt)
    if alg == "gcm":
        return AESGCM(k).decrypt(rest[:12], rest[12:], None)
    iv, ct = rest[:16], rest[16:]
    if alg == "cbc":
        d = Cipher(algorithms.AES(k), modes.CBC(iv)).decryptor()
        data = d.update(ct) + d.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        return unpadder.update(data) + unpadder.finalize()
    d = Cipher(algorithms.AES(k), modes.CTR(iv)).decryptor()
    return d.update(ct) + d.finalize()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "encrypt":
        print(encrypt(sys.argv[2], read_password(sys.argv[3]), sys.stdin.buffer.read()))
    elif len(sys.argv) == 3 and sys.argv[1] == "decrypt":
        sys.stdout.buffer.write(decrypt(read_password(sys.argv[2]), sys.stdin.read()))
    else:
        raise SystemExit(__doc__)
