"""Decode and validate one image, normalising what training needs: RGB, upright, bounded size.

Every failure is a `RecordError` with a reason the ledger counts: `empty_image` (zero bytes or zero
pixels), `decompression_bomb` (more than `max_pixels`, checked from the header before any pixel is
decoded), `truncated_image`, `corrupt_image` (not an image PIL can decode). EXIF orientation is
applied; CMYK, palette, grey, 16-bit and alpha images become 8-bit RGB (alpha composited on white).
"""
from __future__ import annotations

import io
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

from curation.errors import RecordError

MAX_PIXELS = 178_956_970  # PIL's own default bomb limit (2 × its warning threshold)


def decode(data: bytes, max_pixels: int = MAX_PIXELS) -> Image.Image:
    if not data:
        raise RecordError("empty_image", "zero bytes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            w, h = img.size
            if w * h > max_pixels:
                raise RecordError("decompression_bomb", f"{w}×{h} pixels, more than {max_pixels:,}")
            if w == 0 or h == 0:
                raise RecordError("empty_image", f"{w}×{h} pixels")
            img.load()
    except RecordError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise RecordError("decompression_bomb", str(e)) from None
    except UnidentifiedImageError as e:
        raise RecordError("corrupt_image", str(e)) from None
    except (OSError, SyntaxError, ValueError) as e:
        reason = "truncated_image" if "truncated" in str(e).lower() else "corrupt_image"
        raise RecordError(reason, str(e)) from None
    img = ImageOps.exif_transpose(img)
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        img = img.point(lambda v: v / 256).convert("L")  # 16-bit grey to 8 bits
    return img.convert("RGB")
