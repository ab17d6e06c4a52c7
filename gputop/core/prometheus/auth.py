"""Where a Prometheus server is and how to sign in to it: the URL, an auth file, a CA.

Credentials never come from the command line (another user's ``ps`` reads it):
``--prometheus-auth-file FILE`` holds one line, ``user:password`` (HTTP basic auth) or
``bearer TOKEN``, in a file only its owner may read, as ssh asks of a key. A URL with
``user:password@`` works too (for a quick try), but the password is never printed back: the
URL gputop shows, in messages, JSON and on screen, is ``shown``, without them.
"""

from __future__ import annotations

import base64
import os
import stat
import urllib.parse
from dataclasses import field
from typing import TYPE_CHECKING

from gputop.core.errors import UsageError
from gputop.core.numbers import quoted
from gputop.core.private_files import NotRegularFile, read_regular_file
from gputop.core.records import frozen

if TYPE_CHECKING:
    import ssl

MAX_AUTH_FILE_BYTES = 16 << 10
MAX_CA_FILE_BYTES = 4 << 20
"""4 MiB: a system's whole CA bundle is about 220 KB."""


@frozen
class Server:
    url: str
    """The API's base, without credentials and without a trailing slash."""
    authorization: str | None = field(default=None, repr=False)
    """The ``Authorization`` header's value, or None."""
    ca_file: str | None = None

    @property
    def shown(self) -> str:
        """The URL as gputop may print it (never a password)."""
        return self.url

    def tls_context(self) -> ssl.SSLContext | None:
        if self.ca_file is None:
            return None
        import ssl  # only for a CA of one's own (urllib imports it for https:// anyway)

        named = f"--prometheus-ca {self.ca_file!r}"
        try:  # read here, not by OpenSSL, which would wait on a FIFO and read any size
            data = read_regular_file(self.ca_file, MAX_CA_FILE_BYTES + 1)[1]
        except NotRegularFile:
            raise UsageError(f"{named}: not a regular file.") from None
        except OSError as error:
            raise UsageError(f"{named}: cannot open it ({error.strerror}).") from None
        if len(data) > MAX_CA_FILE_BYTES:
            raise UsageError(f"{named}: larger than 4 MiB, far more than a CA bundle.")
        try:  # PEM is ASCII: what is not (a comment's accents) is outside its blocks
            pem = data.decode("ascii", "ignore")
            if "-----BEGIN" not in pem:
                raise ValueError("no PEM certificate")
            return ssl.create_default_context(cadata=pem)
        except (ssl.SSLError, ValueError) as error:
            raise UsageError(
                f"{named}: not a CA certificate file gputop can read ({error.__class__.__name__})."
            ) from None


def check_url(url: str) -> str:
    """``url`` without its trailing slash, or a ``UsageError`` naming what to give (the URL
    shown without any password it holds)."""
    return _parse_url(url)[0]


def _parse_url(url: str, named: str = "--prometheus ") -> tuple[str, str | None]:
    """The URL without credentials, and the basic-auth header its ``user:pass@`` gives;
    ``named``: where it was given, as an error begins (``GPUTOP_PROMETHEUS=``)."""
    shown = _without_secrets(url)
    wanted = (
        f"{named}{quoted(shown)}: give the server's http:// or https:// address, e.g. "
        "http://127.0.0.1:9090"
    )
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        raise UsageError(f"{wanted} (no spaces or control characters).")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # a port that is not a number from 0 to 65535: ValueError
        host = parts.hostname
    except ValueError as error:  # what urllib says names the port, never the password
        raise UsageError(f"{wanted} ({error}).") from None
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"{wanted}.")
    if len(host) > 253 or max(len(label) for label in host.split(".")) > 63:
        raise UsageError(f"{wanted} (a host name of at most 253 characters, 63 between dots).")
    if port == 0:
        raise UsageError(f"{wanted} (port 0 is no server's).")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise UsageError(f"{wanted}, without ? or #.")
    authorization = None
    netloc = parts.netloc
    if "@" in netloc:
        credentials, netloc = netloc.rsplit("@", 1)
        user, _, password = credentials.partition(":")
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        authorization = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return base.rstrip("/"), authorization


def _without_secrets(url: str) -> str:
    """``url`` with whatever stands before an ``@`` in its authority, and its query and
    fragment (a token may be there), replaced by ``***``."""
    shown = _without_password(url)
    cut = min((at for at in (shown.find("?"), shown.find("#")) if at >= 0), default=-1)
    return shown if cut < 0 else shown[: cut + 1] + "***"


def _without_password(url: str) -> str:
    """``url`` with whatever stands before an ``@`` in its authority replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url if "@" not in url else "***@" + url.rsplit("@", 1)[1]
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{scheme}://{authority}{slash}{path}"


def read_auth_file(path: str) -> str:
    """The ``Authorization`` header a ``--prometheus-auth-file`` gives."""
    named = f"--prometheus-auth-file {path!r}"
    try:
        info, data = read_regular_file(path, MAX_AUTH_FILE_BYTES + 1)
    except NotRegularFile:
        raise UsageError(f"{named}: not a regular file.") from None
    except OSError as error:
        raise UsageError(f"{named}: cannot open it ({error.strerror}).") from None
    if info.st_mode & 0o077:
        raise UsageError(
            f"{named}: other users can read or change it (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); a file of credentials must be yours "
            f"alone: chmod 600 {path}"
        )
    if info.st_uid not in (os.geteuid(), 0):
        raise UsageError(f"{named}: owned by another user; a file of credentials must be yours.")
    if len(data) > MAX_AUTH_FILE_BYTES:
        raise UsageError(
            f"{named}: larger than a line of credentials ({MAX_AUTH_FILE_BYTES} bytes)."
        )
    try:
        lines = [line.strip() for line in data.decode("utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise UsageError(f"{named}: not UTF-8 text.") from None
    if len(lines) != 1 or not lines[0].isprintable():
        raise UsageError(f"{named}: give one line, 'user:password' or 'bearer TOKEN'.")
    line = lines[0]
    word, _, token = line.partition(" ")
    if word.lower() == "bearer" and token.strip():
        token = token.strip()
        if not token.isascii() or any(c.isspace() for c in token):
            raise UsageError(f"{named}: a bearer token is one word of ASCII.")
        return f"Bearer {token}"
    if ":" not in line:
        raise UsageError(f"{named}: give one line, 'user:password' or 'bearer TOKEN'.")
    return "Basic " + base64.b64encode(line.encode("utf-8")).decode("ascii")


def server_for(
    url: str, auth_file: str | None = None, ca_file: str | None = None, named: str = "--prometheus "
) -> Server:
    """The server at ``url``, signed in to as ``auth_file`` says (it wins over the URL's
    ``user:pass@``), trusting ``ca_file`` for TLS; ``named`` as ``_parse_url``'s."""
    base, authorization = _parse_url(url, named)
    if auth_file is not None:
        authorization = read_auth_file(auth_file)
    if ca_file is not None:
        if not base.startswith("https://"):
            raise UsageError("--prometheus-ca is for an https:// server.")
        server = Server(base, authorization, ca_file)
        server.tls_context()  # a file that is no CA: said now, as a usage error
        return server
    return Server(base, authorization)
