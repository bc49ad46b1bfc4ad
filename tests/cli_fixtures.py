"""The files and folders the command-line sweep (``test_cli_errors.py``) refers to by name."""

from __future__ import annotations

import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from sine.algorithms import SigAlg, SigningKey
from sine.site import sign_site
from tls12.certs import generate_self_signed, write_credentials


def write_fixtures(root: Path) -> dict[str, str]:
    """The files and folders the cases refer to, by ``{name}``."""
    creds = generate_self_signed(key_size=2048)
    write_credentials(creds, root / "cert.pem", root / "rsa.pem")
    (root / "pub.pem").write_bytes(creds.private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    (root / "ec.pem").write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (root / "garbage.pem").write_bytes(
        b"-----BEGIN PUBLIC KEY-----\nnot*base64*at*all\n-----END PUBLIC KEY-----\n")
    (root / "bad_private.pem").write_bytes(
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    (root / "text.txt").write_text("just some text, no PEM here\n")
    (root / "voters.txt").write_text("alice:secret\nbob:hunter2\n")
    (root / "bad_manifest.json").write_text('{"traces": [{"name": "x", "format": "clf", "files": [{}]}]}')
    docroot = root / "docroot"
    docroot.mkdir()
    (docroot / "index.html").write_text("<html>unsigned</html>\n")
    signed = root / "signed"
    signed.mkdir()
    (signed / "index.html").write_text("<html>signed</html>\n")
    sign_site(signed, SigningKey.generate(SigAlg.ED25519), time.time())
    (root / "scratch").mkdir()
    spells = {name: root / name for name in ("spells_empty", "spells_bad_json", "spells_bad_pcap")}
    for folder in spells.values():  # campaign --pcap folders: none, a garbled record, no pcap
        folder.mkdir()
    (spells["spells_bad_json"] / "t1.json").write_text("[1, 2]\n")
    (spells["spells_bad_pcap"] / "t1.json").write_text('{"mode": "kill", "kill_epoch": 1.0}\n')
    (spells["spells_bad_pcap"] / "t1.pcap").write_text("not a capture\n")
    names = ("cert", "rsa", "pub", "ec", "garbage", "bad_private")
    files = {name: str(root / f"{name}.pem") for name in names}
    return {**files, "text": str(root / "text.txt"), "voters": str(root / "voters.txt"),
            "bad_manifest": str(root / "bad_manifest.json"),
            "docroot": str(docroot), "signed": str(signed), "scratch": str(root / "scratch"),
            "missing": str(root / "no-such-file"),
            **{name: str(folder) for name, folder in spells.items()}}
