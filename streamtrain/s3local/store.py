"""The objects of the local S3 server, in memory (pure: no HTTP).

Owned here: :class:`S3Store` (objects by key, the keys kept sorted so a list costs a
binary search plus the keys it returns), :class:`S3Object` (each one's ``<Contents>``
entry rendered once, at its PUT), :class:`Cursor` (where a list page ended: a key, or a
common prefix whose keys the next page skips) and :class:`S3Stats` (what a client cost).
Conditional writes (``If-None-Match: *``, ``If-Match: ETAG``) raise
:class:`PreconditionFailed`. Thread-safe (one lock).
"""

from __future__ import annotations

import bisect
import hashlib
import threading
import time
from dataclasses import dataclass
from xml.sax.saxutils import escape

from streamtrain.units import MS_PER_S, s_to_ms

__all__ = ["Cursor", "PreconditionFailed", "S3Object", "S3Stats", "S3Store", "etag_matches"]


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a list page ended: the last key it returned, or its last common prefix."""

    key: str
    common_prefix: bool = False


@dataclass(frozen=True, slots=True)
class S3Object:
    body: bytes
    etag: str  # quoted, as S3 sends it
    modified_s: float
    content_type: str
    entry: str = ""  # its <Contents> element in a list, rendered once at the PUT


@dataclass(frozen=True, slots=True)
class S3Stats:
    """What the store served since it started: a way to see what a client costs."""

    objects: int  # stored now
    puts: int
    creates: int  # puts of a key that did not exist
    gets: int  # GET and HEAD of an object
    lists: int  # list pages served
    listed_keys: int  # keys and common prefixes in those pages


class PreconditionFailed(Exception):
    """An ``If-Match`` / ``If-None-Match`` that does not hold."""


class S3Store:
    """Objects by key, the keys kept sorted for prefix listing; thread-safe."""

    def __init__(self) -> None:
        self._objects: dict[str, S3Object] = {}
        self._keys: list[str] = []
        self._lock = threading.Lock()
        self._version = 0
        self._creates = self._gets = self._lists = self._listed_keys = 0

    def stats(self) -> S3Stats:
        with self._lock:
            return S3Stats(
                objects=len(self._keys),
                puts=self._version,
                creates=self._creates,
                gets=self._gets,
                lists=self._lists,
                listed_keys=self._listed_keys,
            )

    def put(
        self,
        key: str,
        body: bytes,
        content_type: str,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> S3Object:
        with self._lock:
            current = self._objects.get(key)
            if if_none_match == "*" and current is not None:
                raise PreconditionFailed(key)
            if if_match is not None and (
                current is None or not etag_matches(if_match, current.etag)
            ):
                raise PreconditionFailed(key)
            self._version += 1
            digest = hashlib.md5(body + self._version.to_bytes(8, "little"), usedforsecurity=False)
            etag, modified_s = f'"{digest.hexdigest()}"', time.time()
            entry = (
                f"<Contents><Key>{escape(key)}</Key><LastModified>{_iso(modified_s)}"
                f"</LastModified><ETag>{escape(etag)}</ETag><Size>{len(body)}"
                "</Size><StorageClass>STANDARD</StorageClass></Contents>"
            )
            stored = S3Object(body, etag, modified_s, content_type, entry)
            if current is None:
                bisect.insort(self._keys, key)
                self._creates += 1
            self._objects[key] = stored
            return stored

    def get(self, key: str) -> S3Object | None:
        with self._lock:
            self._gets += 1
            return self._objects.get(key)

    def delete(self, key: str) -> None:
        with self._lock:
            if self._objects.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]

    def _past(self, common: str, index: int) -> int:
        """The index of the first key at or after ``index`` outside ``common``."""
        index = max(index, bisect.bisect_left(self._keys, common + "\U0010ffff"))
        while index < len(self._keys) and self._keys[index].startswith(common):
            index += 1  # keys holding U+10FFFF itself (never seen, but possible)
        return index

    def _start(self, prefix: str, after: Cursor) -> int:
        if after.key < prefix:
            return bisect.bisect_left(self._keys, prefix)
        index = bisect.bisect_right(self._keys, after.key)
        return self._past(after.key, index) if after.common_prefix else index

    def _list_locked(
        self, prefix: str, after: Cursor, delimiter: str, max_keys: int
    ) -> tuple[list[tuple[str, S3Object]], list[str], Cursor | None]:
        objects: list[tuple[str, S3Object]] = []
        prefixes: list[str] = []
        index = self._start(prefix, after)
        last: Cursor | None = None
        while index < len(self._keys):
            key = self._keys[index]
            if not key.startswith(prefix):
                break
            if len(objects) + len(prefixes) >= max_keys:
                return objects, prefixes, last
            rest = key[len(prefix) :]
            if delimiter and delimiter in rest:
                common = prefix + rest.split(delimiter, 1)[0] + delimiter
                prefixes.append(common)
                last = Cursor(common, common_prefix=True)
                index = self._past(common, index)  # every key under it is in it
                continue
            objects.append((key, self._objects[key]))
            last = Cursor(key)
            index += 1
        return objects, prefixes, None

    def list(
        self, prefix: str, after: Cursor | str, delimiter: str, max_keys: int
    ) -> tuple[list[tuple[str, S3Object]], list[str], Cursor | None]:
        """Keys under ``prefix`` after ``after`` (a key, as ``start-after``, or where the
        previous page ended): (objects, common prefixes, where this page ended when
        there are more). A page that ended on a common prefix goes on past every key
        under it, so no prefix is listed twice."""
        cursor = after if isinstance(after, Cursor) else Cursor(after)
        with self._lock:
            objects, prefixes, more = self._list_locked(prefix, cursor, delimiter, max_keys)
            self._lists += 1
            self._listed_keys += len(objects) + len(prefixes)
        return objects, prefixes, more


def etag_matches(condition: str, etag: str) -> bool:
    wanted = {part.strip() for part in condition.split(",")}
    return "*" in wanted or etag in wanted or etag.strip('"') in wanted


def _iso(modified_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(modified_s)) + (
        f".{int(s_to_ms(modified_s)) % MS_PER_S:03d}Z"
    )
