"""Test certificates made at test time (never committed): a CA, and certificates it signs, as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kraftlab"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class ThrowawayCA:
    """A throwaway certificate authority writing PEM files under `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(_name("kraftlab test CA")).issuer_name(_name("kraftlab test CA"))
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.ca_pem = self.cert.public_bytes(serialization.Encoding.PEM).decode()
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_text(self.ca_pem)

    def issue(self, cn: str) -> tuple[Path, str, str]:
        """A certificate for `cn` (also valid for 127.0.0.1): (key+chain PEM file, chain PEM, key PEM)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(self.key, hashes.SHA256())
        )
        chain = cert.public_bytes(serialization.Encoding.PEM).decode() + self.ca_pem
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
        path = self.directory / f"{cn}.pem"
        path.write_text(key_pem + chain)
        return path, chain, key_pem
