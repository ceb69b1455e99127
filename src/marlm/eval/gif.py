"""The episode animation: an animated GIF written frame by frame, never all frames in memory.

Written to ``<path>.tmp`` and renamed when finished, so a crash never leaves a half-written GIF.
Pillow is imported by the first frame, not with this module.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np


def save_episode_gif(
    frames: Sequence[np.ndarray], path: str | Path, *, fps: float = 4.0, max_frames: int = 600
) -> Path:
    """Write an animated GIF of an episode whose frames are all in memory (see
    :class:`GifStream` to write them as they come).

    Args:
        frames: images ``uint8[H, W, 3]`` (RGB), all of one shape.
        path: the GIF to write.
        fps: frames per second (GIF stores the delay in 10 ms units, so it is rounded).
        max_frames: keep at most this many frames, evenly spaced (first and last kept), to bound size.

    Raises:
        ValueError: no frames, a frame of the wrong dtype or shape, or ``fps <= 0``.
        OSError: the file cannot be written (its temporary file is removed).
    """
    if not frames:
        raise ValueError("no frames to animate")
    if len(frames) > max_frames:
        keep = np.unique(np.linspace(0, len(frames) - 1, max_frames).round().astype(int))
        frames = [frames[i] for i in keep]
    with GifStream(path, fps=fps) as gif:
        for f in frames:
            gif.append(f)
        try:
            return gif.finish()
        finally:
            gif.discard()


class GifStream:
    """An animated GIF written frame by frame, so an episode's frames are never all in memory:
    peak memory is one frame's, whatever the episode's length.

    Each frame is quantised to its own 256-colour palette (Pillow's adaptive palette, as
    Pillow's own multi-frame writer does) and appended to ``<path>.tmp`` as one image with a
    local colour table (GIF89a, sections 20-23); :meth:`finish` writes the trailer and renames
    the file into place. With ``every = k`` only every k-th frame offered is kept (the first
    one always), so the file's size is bounded too: :meth:`for_frames` picks ``k`` for a known
    number of frames and a cap.

    A write that fails (a full disk) removes the temporary file and drops the animation; the
    error is raised by :meth:`finish`, after the caller has written what matters more (the
    run's metrics), never from :meth:`append` in the middle of a run. Leaving the ``with``
    block by an exception, or :meth:`discard`, removes the temporary file.

    Args:
        path: the GIF to write. fps: frames per second (stored in 10 ms units, >= 20 ms).
        every: keep every ``every``-th frame offered (>= 1).

    Raises:
        ValueError: ``fps <= 0`` or ``every < 1``; from :meth:`append`, a frame that is not
            ``uint8[H, W, 3]`` or of another shape than the first.
    """

    def __init__(self, path: str | Path, *, fps: float = 4.0, every: int = 1) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be > 0, not {fps}")
        if every < 1:
            raise ValueError(f"every must be >= 1, not {every}")
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self.delay_cs = max(2, round(max(20, round(1000.0 / fps)) / 10))
        self.every = every
        self.offered = 0
        self.written = 0
        self.error: OSError | None = None
        self._shape: tuple[int, ...] | None = None
        self._file: BinaryIO | None = None

    @classmethod
    def for_frames(
        cls, path: str | Path, n_frames: int, *, fps: float = 4.0, max_frames: int = 600
    ) -> GifStream:
        """A stream that keeps at most ``max_frames`` of ``n_frames`` expected frames, evenly
        strided (every ``ceil(n_frames / max_frames)``-th)."""
        return cls(path, fps=fps, every=max(1, -(-n_frames // max_frames)))

    def __len__(self) -> int:
        return self.written

    def __enter__(self) -> GifStream:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            self.discard()

    def discard(self) -> None:
        """Remove the temporary file of a stream not finished (nothing after :meth:`finish`)."""
        if self._file is not None:
            self._abort()

    def append(self, frame: np.ndarray) -> None:
        """Offer one frame ``uint8[H, W, 3]`` (RGB); written at once when it is kept."""
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(
                f"frame {self.offered}: expected uint8[H, W, 3], got {frame.dtype}{list(frame.shape)}"
            )
        if self._shape is None:
            self._shape = frame.shape
        elif frame.shape != self._shape:
            raise ValueError(
                f"frame {self.offered}: shape {frame.shape} differs from frame 0 {self._shape}"
            )
        keep = self.offered % self.every == 0
        self.offered += 1
        if not keep or self.error is not None:
            return
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.tmp, "wb")  # noqa: SIM115  (closed by finish/_abort)
                self._file.write(_gif_header(frame.shape[1], frame.shape[0]))
            self._file.write(_gif_frame(frame, self.delay_cs))
            self._file.flush()  # on disk now (a full disk is found here, not at the end)
            self.written += 1
        except OSError as e:  # a write error names no file: this one names the GIF
            self.error = e if e.filename else OSError(e.errno, e.strerror, str(self.path))
            self._abort()

    def finish(self) -> Path:
        """Write the trailer and rename the file into place; returns its path.

        Raises:
            ValueError: no frame was offered.
            OSError: a write failed (now or during :meth:`append`); no file is left behind.
        """
        if self.error is not None:
            raise self.error
        if self._file is None:
            raise ValueError("no frames to animate")
        try:
            self._file.write(b"\x3b")  # trailer
            self._file.close()
            self._file = None
            os.replace(self.tmp, self.path)
        except OSError:
            self._abort()
            raise
        return self.path

    def _abort(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        self.tmp.unlink(missing_ok=True)


def _gif_header(width: int, height: int) -> bytes:
    """GIF89a header, a logical screen without a global colour table, and the NETSCAPE2.0
    application extension that loops the animation forever."""
    import struct

    screen = struct.pack("<HHBBB", width, height, 0x70, 0, 0)
    loop = b"\x21\xff\x0bNETSCAPE2.0\x03\x01" + struct.pack("<H", 0) + b"\x00"
    return b"GIF89a" + screen + loop


def _gif_frame(frame: np.ndarray, delay_cs: int) -> bytes:
    """One frame as GIF blocks: a graphic control extension (``delay_cs`` hundredths of a
    second, no disposal), its image descriptor with a local colour table, and its LZW data.
    Pillow encodes the frame as a one-image GIF; its table moves into the image descriptor."""
    import io
    import struct

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame, mode="RGB").save(buf, format="GIF", optimize=False)
    data = buf.getvalue()
    flags, pos = data[10], 13
    table, bits = b"", 0
    if flags & 0x80:  # a global colour table
        bits = flags & 0x07
        table = data[pos : pos + 3 * 2 ** (bits + 1)]
        pos += len(table)
    while data[pos] == 0x21:  # extensions: skipped (ours follows)
        pos += 2
        while data[pos]:
            pos += data[pos] + 1
        pos += 1
    if data[pos] != 0x2C:
        raise ValueError("Pillow wrote a GIF without an image descriptor")
    descriptor = bytearray(data[pos : pos + 10])
    pos += 10
    if descriptor[9] & 0x80:  # a local colour table already
        bits = descriptor[9] & 0x07
        table = data[pos : pos + 3 * 2 ** (bits + 1)]
        pos += len(table)
    descriptor[9] = 0x80 | (descriptor[9] & 0x40) | bits
    control = b"\x21\xf9\x04\x04" + struct.pack("<H", delay_cs) + b"\x00\x00"
    if data[-1] != 0x3B:
        raise ValueError("Pillow wrote a GIF without its trailer")
    return control + bytes(descriptor) + table + data[pos:-1]
