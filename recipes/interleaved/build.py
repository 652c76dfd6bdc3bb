"""Build the interleaved demo's inputs (recipes/interleaved.yaml) from files already in the repo: the image demo's
public-domain/CC0 photos (recipes/images/shards, see recipes/images/SOURCES.md), one LJ Speech clip (public
domain, recipes/audio/speech) and texts written for this demo (CC0). Every check shows once:

    obelics/part-00000.parquet  OBELICS layout (parallel texts/images lists, general_metadata with the page
                                URL), images as bytes as after acquisition: a space-history page with three
                                photos; a kitchen page whose second image is still a URL (image_not_acquired);
                                a cat page and a re-post whose cat is a re-encoded copy (image_near_duplicate:
                                the image leaves the re-post, the page stays); a page on a domain whose
                                robots.txt opts out (robots_opt_out); a coin page with a corrupt image
                                (corrupt_image); a near-copy of the space page (near_duplicate, MinHash); a
                                microscopy page quoting the reading benchmark (contaminated:reading)
    mint/shard-00000.tar        MINT-1T PDF layout: key.json (texts, images, url) + key.tiff holding the
                                document's images as frames: a camera manual, a clock-repair leaflet and a
                                lunar atlas whose photo is a benchmark image (contaminated:lunar_vqa)
    chat/conversations.jsonl    OpenAI-style conversations with media in chat/media/: a photo and a tool call,
                                a speech clip, a plain one, and one whose image is a URL (missing_media)
    benchmarks/, robots/        the reading benchmark, the benchmark image, the opt-out snapshot

Deterministic (fixed tar metadata, fixed encoder settings). Run: python recipes/interleaved/build.py
"""
from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PHOTOS = {"astronaut": "0000", "camera": "0001", "cat": "0002", "coffee": "0003", "rocket": "0004",
          "clock": "0005", "hubble": "0006", "coins": "0007", "cat_copy": "0100", "broken": "0102"}
TEXTURES = {"brick": "0000", "grass": "0001", "cell": "0002", "ihc": "0003", "moon": "0004"}

SPACE = ["Crewed spaceflight grew from a handful of test pilots into a profession with its own schools, "
         "checklists and long years of training. The portrait below shows an astronaut in the orange suit worn "
         "for launch and landing, photographed before a mission of the nineteen nineties.",
         "Launch day itself is short. Fuelling takes hours, the count pauses at planned holds, and the vehicle "
         "leaves the pad within seconds once the engines reach full thrust and the clamps let go.",
         "Far beyond the launch site, telescopes in orbit look back to the earliest galaxies. A long exposure of "
         "an empty patch of sky turned out to hold thousands of them, each a smudge of light older than the Sun."]
KITCHEN = ["A good cup of coffee starts with fresh beans and water just off the boil. Grind shortly before "
           "brewing, weigh the coffee rather than counting spoons, and keep the cup warm.",
           "Latte art is milk foam poured with a steady hand: the pattern forms as the foam settles on the espresso.",
           "Clean the grinder every week; old oil on the burrs makes every later cup taste stale."]
CAT = ["Our tabby spends the afternoon on the windowsill, moving only to follow the sun across the room. Tabbies "
       "are not a breed but a coat pattern, with stripes, swirls or spots and a letter M on the forehead.",
       "Indoor cats need places to climb and hide; a shelf by a window is worth more than any toy."]
REPOST = ["Someone shared this photo of a sleeping tabby with the caption that cats spend two thirds of their "
          "lives asleep, mostly in short naps spread across the day and night.",
          "The grass in the garden grew long this summer, which the neighbour's dog enjoyed a great deal."]
TEXTURE = ["Brick walls and meadows make good test patterns for cameras: fine repeating detail shows at once "
           "whether a lens is sharp and whether the sensor smears the texture into noise.",
           "We photographed both on the same afternoon with the same settings to compare them side by side."]
COINS = ["The museum's coin cabinet holds several hundred pieces, from worn bronze to polished silver. Each "
         "coin is photographed on a grey card so that its relief casts soft shadows and the lettering stays "
         "legible.", "A second photograph of the reverse sides follows below."]
SPACE_COPY = [SPACE[0] + " Republished with permission.", SPACE[1], SPACE[2] + " Read the original story."]
CELLS = ["Under the microscope a stained tissue section becomes a map. The nuclei take up the dark stain while "
         "the surrounding cytoplasm stays pale, so a pathologist can count dividing cells at a glance and "
         "estimate how fast a tissue grows.",
         "Immunohistochemistry goes further: antibodies tagged with a brown dye bind one protein only, and "
         "where the dye gathers the protein is present. Comparing neighbouring sections shows which cells "
         "carry it and which do not."]
READING = CELLS[0]  # the benchmark's passage: the microscopy page quotes it in full
CAMERA = ["Hold the camera with both hands and keep your elbows against your body; most blurred pictures come "
          "from movement, not from the lens.",
          "The shutter button has two stages: half way focuses and meters, all the way takes the picture."]
CLOCK = ["A clock that runs fast usually needs its pendulum lowered a little: turn the nut under the bob to the "
         "left, one turn at a time, and check the time again after a day.",
         "Old masonry behind a wall clock should be dry before the clock is hung; damp brick swells the case."]
LUNAR = ["The near side of the Moon shows the same face to us every night. Its dark plains are old lava flows "
         "and its bright highlands are the older crust, scarred by craters of every size.",
         "Our atlas numbers the large craters from north to south and lists their diameters in kilometres."]


class NotAcquired:
    """An image entry that is still its URL, as OBELICS publishes them (the images were never fetched)."""

    def __init__(self, url: str):
        self.url = url


def tar_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "", ""
    tar.addfile(info, io.BytesIO(data))


def document(items: list) -> tuple[list, list]:
    """Parallel OBELICS lists from items: a str is a text, anything else an image entry."""
    return ([it if isinstance(it, str) else None for it in items], [None if isinstance(it, str) else it for it in items])


def main() -> None:
    shards = REPO / "recipes" / "images" / "shards"
    cap, unc = tar_members(shards / "captioned-00000.tar"), tar_members(shards / "uncaptioned-00000.tar")
    img = {k: cap[f"{v}.jpg"] for k, v in PHOTOS.items()} | {k: unc[f"{v}.jpg"] for k, v in TEXTURES.items()}

    pages = [("space-history", "https://blog.example.org/space/launches",
              [SPACE[0], img["astronaut"], SPACE[1], img["rocket"], SPACE[2], img["hubble"]]),
             ("kitchen", "https://food.example.org/coffee",
              [KITCHEN[0], img["coffee"], KITCHEN[1], NotAcquired("https://food.example.org/latte-art.jpg"),
               KITCHEN[2]]),
             ("tabby", "https://pets.example.org/cats/tabby", [CAT[0], img["cat"], CAT[1]]),
             ("tabby-repost", "https://mirror.example.net/cats", [REPOST[0], img["cat_copy"], REPOST[1], img["grass"]]),
             ("textures", "https://www.optout.example/textures", [TEXTURE[0], img["brick"], TEXTURE[1]]),
             ("coins", "https://museum.example.org/coins", [COINS[0], img["coins"], COINS[1], img["broken"]]),
             ("space-history-copy", "https://copy.example.com/launches",
              [SPACE_COPY[0], img["rocket"], SPACE_COPY[1], SPACE_COPY[2]]),
             ("microscopy", "https://lab.example.org/cells", [CELLS[0], img["cell"], CELLS[1], img["ihc"]])]
    rows = []
    for pid, url, items in pages:
        texts, images = document(items)
        images = [{"bytes": None, "path": i.url} if isinstance(i, NotAcquired) else {"bytes": i, "path": None}
                  if i is not None else None for i in images]
        rows.append({"id": pid, "texts": texts, "images": images,
                     "metadata": json.dumps([None if t is not None else {"alt_text": ""} for t in texts]),
                     "general_metadata": json.dumps({"url": url, "warc_filename": "demo"})})
    schema = pa.schema([("id", pa.string()), ("texts", pa.list_(pa.string())),
                        ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
                        ("metadata", pa.string()), ("general_metadata", pa.string())])
    (HERE / "obelics").mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), HERE / "obelics" / "part-00000.parquet",
                   compression="zstd")

    pdfs = [("camera-manual", "https://pdfs.example.org/camera-manual.pdf", [CAMERA[0], img["camera"], CAMERA[1]]),
            ("clock-repair", "https://pdfs.example.org/clock-repair.pdf", [img["clock"], CLOCK[0], CLOCK[1], img["brick"]]),
            ("lunar-atlas", "https://pdfs.example.org/lunar-atlas.pdf", [LUNAR[0], img["moon"], LUNAR[1]])]
    (HERE / "mint").mkdir(exist_ok=True)
    with tarfile.open(HERE / "mint" / "shard-00000.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, url, items in pdfs:
            texts, images = document(items)
            names = [None if i is None else f"page_0_image_{k}" for k, i in enumerate(images)]
            frames = [Image.open(io.BytesIO(i)).convert("RGB") for i in images if i is not None]
            obj = {"texts": texts, "images": names, "url": url,
                   "image_metadata": [{"width": f.width, "height": f.height, "page": 0} for f in frames]}
            add(tar, f"{key}.json", json.dumps(obj).encode())
            buf = io.BytesIO()
            frames[0].save(buf, "TIFF", save_all=True, append_images=frames[1:], compression="tiff_deflate")
            add(tar, f"{key}.tiff", buf.getvalue())

    media = HERE / "chat" / "media"
    media.mkdir(parents=True, exist_ok=True)
    (media / "tabby.jpg").write_bytes(img["cat"])
    shutil.copyfile(REPO / "recipes" / "audio" / "speech" / "LJ001-0002.ogg", media / "LJ001-0002.ogg")
    tools = [{"type": "function", "function": {"name": "lookup_breed", "description": "Facts about a cat breed",
                                               "parameters": {"type": "object", "required": ["breed"],
                                                              "properties": {"breed": {"type": "string"}}}}}]
    chats = [
        {"id": "photo-tool", "tools": tools, "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "media/tabby.jpg"}},
                                         {"type": "text", "text": "What kind of cat is this, and is it a breed?"}]},
            {"role": "assistant", "reasoning_content": "Striped coat with an M on the forehead: a tabby. Check.",
             "tool_calls": [{"id": "t1", "type": "function",
                             "function": {"name": "lookup_breed", "arguments": "{\"breed\": \"tabby\"}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "Tabby is a coat pattern, not a breed."},
            {"role": "assistant", "content": "A tabby cat. Tabby is a coat pattern found in many breeds."}]},
        {"id": "speech", "messages": [
            {"role": "user", "content": "<audio>\nTranscribe the recording."},
            {"role": "assistant", "content": "in being comparatively modern."}], "audios": ["media/LJ001-0002.ogg"]},
        {"id": "plain", "messages": [
            {"role": "user", "content": "How long should coffee brew in a French press?"},
            {"role": "assistant", "content": "About four minutes, then press slowly and pour at once."}]},
        {"id": "remote-image", "messages": [
            {"role": "user", "content": "<image> Describe the picture."},
            {"role": "assistant", "content": "A lighthouse at dusk."}], "images": ["https://img.example.org/l.jpg"]},
    ]
    (HERE / "chat" / "conversations.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chats))

    (HERE / "benchmarks" / "images").mkdir(parents=True, exist_ok=True)
    Image.open(io.BytesIO(img["moon"])).resize((150, 150), Image.BICUBIC).save(HERE / "benchmarks" / "images" / "q1.png")
    (HERE / "benchmarks" / "reading.jsonl").write_text(json.dumps({"id": "r1", "passage": READING}) + "\n")
    (HERE / "robots" / "2024-03-01").mkdir(parents=True, exist_ok=True)
    (HERE / "robots" / "2024-03-01" / "www.optout.example.txt").write_text("User-agent: GPTBot\nDisallow: /\n")


if __name__ == "__main__":
    main()
