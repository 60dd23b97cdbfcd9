"""TLS on the link: a self-signed certificate, pinned by its SHA-256 fingerprint.

Theory of operation. There is no CA. ``raydebug hub --tls`` creates a certificate and key
on its first start and keeps them in the per-user state directory (mode 0600), so later
starts present the same certificate. Workers learn its fingerprint where they learn the
hub's address (the Ray KV's HubInfo, the local state file, or ``RAYDEBUG_HUB_CERT``) and
refuse a hub that presents any other certificate. The HMAC challenge-response
(:mod:`raydebug.protocol.control`) then runs inside TLS, unchanged.

The agent imports this module with the standard library only; creating a certificate needs
``cryptography`` and happens in the hub alone.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from . import state_file
from .errors import AuthenticationError, ConfigurationError, HubUnreachableError

CERT_FILE = "hub-cert.pem"
KEY_FILE = "hub-key.pem"
VALIDITY = datetime.timedelta(days=3650)
_PREFIX = "sha256:"


def fingerprint(der: bytes) -> str:
    """``sha256:<hex>`` of a DER certificate: what workers pin."""
    return _PREFIX + hashlib.sha256(der).hexdigest()


def parse_pin(text: str, what: str) -> str:
    """A pinned certificate as its canonical fingerprint.

    ``text`` is a fingerprint (``sha256:<hex>`` or bare hex, colons allowed) or the path of
    the hub's PEM certificate. Raises :class:`ConfigurationError` naming ``what``.
    """
    text = text.strip()
    digits = text.lower().removeprefix(_PREFIX).replace(":", "")
    if len(digits) == 64 and all(c in "0123456789abcdef" for c in digits):
        return _PREFIX + digits
    try:
        pem = Path(text).read_text()
        return fingerprint(ssl.PEM_cert_to_DER_cert(pem))
    except (OSError, ValueError):
        raise ConfigurationError(
            f"{what}={text!r} is neither a SHA-256 certificate fingerprint (as `raydebug hub "
            "--tls` prints) nor a readable PEM certificate file") from None


def wrap_pinned(sock: socket.socket, pin: str, address: str) -> ssl.SSLSocket:
    """TLS over connected ``sock``, accepted only if the hub presents the pinned certificate.

    The handshake is bounded by ``sock``'s timeout. On failure the connection is closed and
    :class:`HubUnreachableError` (no TLS there) or :class:`AuthenticationError` (another
    certificate: perhaps someone else's hub, perhaps an interception) is raised.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # the pin replaces a CA and a host name
    context.verify_mode = ssl.CERT_NONE
    tls = context.wrap_socket(sock, do_handshake_on_connect=False)
    try:
        tls.do_handshake()
    except OSError as error:  # ssl.SSLError included
        tls.close()
        reason = getattr(error, "reason", None) or error.strerror or type(error).__name__
        raise HubUnreachableError(
            f"TLS handshake with the hub at {address} failed ({reason}): was it started "
            "with --tls? Without TLS, unset RAYDEBUG_HUB_CERT") from None
    presented = fingerprint(tls.getpeercert(binary_form=True) or b"")
    if not hmac.compare_digest(presented, pin):
        tls.close()
        raise AuthenticationError(
            f"the hub at {address} presented certificate {presented}, not the pinned "
            f"{pin} (RAYDEBUG_HUB_CERT, or the hub's published certificate): refusing to "
            "connect")
    return tls


# -- the hub's side ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Certificate:
    cert_path: Path
    key_path: Path
    fingerprint: str

    def server_context(self) -> ssl.SSLContext:
        """The agent listener's context. No session tickets: workers never resume a
        session, so nothing but application data follows the handshake (the agent still
        relays a TLS data channel on one thread, see :mod:`raydebug.agent.link.relay`)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.num_tickets = 0
        context.load_cert_chain(self.cert_path, self.key_path)
        return context


def load_or_create(directory: Path) -> Certificate:
    """The hub's certificate in ``directory``, created (self-signed, mode 0600) when missing.

    Raises :class:`ConfigurationError` when it can be neither read nor written.
    """
    cert_path, key_path = directory / CERT_FILE, directory / KEY_FILE
    try:
        if not (cert_path.exists() and key_path.exists()):
            cert_pem, key_pem = _self_signed()
            state_file.write_private(key_path, key_pem)
            state_file.write_private(cert_path, cert_pem)
        der = ssl.PEM_cert_to_DER_cert(cert_path.read_text())
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"cannot use the hub's TLS certificate in {directory}: "
                                 f"{error}") from None
    return Certificate(cert_path, key_path, fingerprint(der))


def _self_signed() -> tuple[bytes, bytes]:
    """A new P-256 key and a certificate for it signed by itself (PEM, PEM)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise ConfigurationError("--tls needs the cryptography package: "
                                 "pip install 'cryptography>=42'") from None
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "raydebug hub")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + VALIDITY)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem

