"""Short references for inline blobs (base64 images, `data:` URLs) that are never stored as text."""

from __future__ import annotations

from extractors.ids import stable_hash


def estimated_base64_bytes(payload: str) -> int:
    """The decoded size of a base64 text, from its length and padding (the text is never decoded)."""
    body = payload.strip()
    padding = len(body) - len(body.rstrip("="))
    return max(0, len(body) * 3 // 4 - padding)


def data_url_reference(url: str, *, kind: str = "image") -> str:
    """`image/png sha256:<hex> 12345 bytes` for a `data:` URL; `<kind> <url>` for any other URL or path.

    The digest is taken over the URL's payload text as written (the base64 characters), so the same image
    gives the same reference everywhere; the size is the decoded size, estimated from the base64 length.
    """
    if not url.startswith("data:"):
        return f"{kind} {url}"
    header, sep, payload = url.partition(",")
    if not sep:
        return f"{kind} data: URL without payload"
    media = header[len("data:") :].split(";", 1)[0] or f"{kind}/unknown"
    size = estimated_base64_bytes(payload) if ";base64" in header else len(payload.encode("utf-8", "surrogatepass"))
    return f"{media} sha256:{stable_hash(payload)} {size} bytes"


def base64_reference(payload: str, media: str = "image/png") -> str:
    """A reference for a bare base64 blob (Codex `image_generation_call.result`)."""
    return f"{media} sha256:{stable_hash(payload)} {estimated_base64_bytes(payload)} bytes"
