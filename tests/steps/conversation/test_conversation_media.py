"""Conversation media wired to the codecs: references resolved and checked with the record, placeholders expanded
into image and audio blocks at tokenization (decoded token by token with the loss mask), mismatches quarantined,
and a recipe that runs it end to end without a text-only run ever importing torch."""
from __future__ import annotations

import base64
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from curation.core.record import QuarantineSink, Record
from curation.steps.conversation.media import ConversationMedia
from tests.chats import decoded, parse, runs, vocab_dict
from tests.conftest import REPO, VOCAB
from tests.interleaved_data import encoded, picture

TOOLS = [{"type": "function", "function": {
    "name": "weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def wav(seconds: float = 1.0, rate: int = 16000, hz: float = 440.0) -> bytes:
    import soundfile as sf
    t = np.arange(int(seconds * rate)) / rate
    buf = io.BytesIO()
    sf.write(buf, 0.5 * np.sin(2 * np.pi * hz * t), rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def conversation(image_ref: str, audio_ref: str) -> dict:
    """A user turn with an image and a clip, an assistant turn with thinking and a tool call, its output, an answer."""
    return {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather where this was taken? "},
                                     {"type": "image_url", "image_url": {"url": image_ref}},
                                     {"type": "text", "text": " Also listen: "},
                                     {"type": "input_audio", "input_audio": {"data": audio_ref, "format": "wav"}}]},
        {"role": "assistant", "reasoning_content": "Bern skyline; ask the tool.",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "weather", "arguments": "{\"city\": \"Bern\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."}], "tools": TOOLS}


def _record(row: dict, rid: str = "c0") -> Record:
    p = parse(row)
    return Record(id=rid, source="sft", text=p.text, meta={"chat": p.chat, "media": p.media})


def _media(records, root, kinds=("image", "audio"), min_side=32):
    step = ConversationMedia(kinds=list(kinds), root=root, min_side=min_side, max_seconds=30.0, sink=QuarantineSink())
    return list(step.run(records)), step


def test_media_references_are_resolved_checked_and_carried_with_the_record(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "bern.png").write_bytes(encoded(picture(3)))
    clip = base64.b64encode(wav()).decode()
    (kept,), step = _media([_record(conversation("img/bern.png", clip))], tmp_path)
    assert kept.payload["media"][0] == encoded(picture(3)) and kept.payload["media"][1][:4] == b"fLaC"   # 24 kHz mono FLAC
    assert kept.meta["media"][0]["width"] == 96 and kept.meta["media"][1]["seconds"] == 1.0
    assert step.stats.balanced()


@pytest.mark.parametrize("image,reason", [
    ("https://cdn.example.org/bern.png", "missing_media"),    # never downloaded at run time
    ("nowhere.png", "missing_media"),
    ("../secret.png", "path_outside_input"),                 # outside the media root
    ("data:image/png;base64,@@@", "bad_media"),
    ("broken.png", "corrupt_image"),
    ("tiny.png", "image_too_small"),
])
def test_a_conversation_whose_media_cannot_be_used_is_quarantined_with_the_reason(tmp_path, image, reason):
    (tmp_path / "img").mkdir()
    (tmp_path / "secret.png").write_bytes(encoded(picture(1)))
    (tmp_path / "img" / "broken.png").write_bytes(b"\x89PNG not really")
    (tmp_path / "img" / "tiny.png").write_bytes(encoded(picture(1, (10, 10))))
    kept, step = _media([_record(conversation(image, base64.b64encode(wav()).decode()))], tmp_path / "img")
    assert kept == [] and step.stats.quarantined == {reason: 1}


def test_media_of_a_kind_the_source_does_not_expand_is_refused(tmp_path):
    (tmp_path / "a.png").write_bytes(encoded(picture(1)))
    kept, step = _media([_record(conversation("a.png", base64.b64encode(wav()).decode()))], tmp_path,
                        kinds=("image",))
    assert kept == [] and step.stats.quarantined == {"unexpanded_media": 1}


@pytest.fixture(scope="module")
def tokenizer():
    torch = pytest.importorskip("torch")
    from curation.core.vocab import Vocabulary
    from curation.steps.audio.codec import WavTokenizerEncoder
    from curation.steps.codecs import load_codec
    from curation.steps.conversation.media_tokenize import ConversationMediaTokenizer
    from curation.steps.image.codec import IBQEncoder
    from curation.steps.text.tokenize import TextTokenizer
    torch.set_num_threads(1)
    image = load_codec(REPO / "tokenizers" / "curate-demo-ibq.yaml", IBQEncoder)
    audio = load_codec(REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml", WavTokenizerEncoder)

    def make(**kw):
        text = TextTokenizer(Vocabulary.load(VOCAB), reasoning=kw.pop("reasoning", None))
        return ConversationMediaTokenizer(text, image_codec=image, audio_codec=audio, area=4096, sink=QuarantineSink(),
                                          **kw)
    return make


def test_placeholders_expand_into_the_image_and_audio_blocks_with_their_masks(tmp_path, tokenizer):
    from curation.train.chat_mask import ConversationMask
    (tmp_path / "bern.png").write_bytes(encoded(picture(3)))
    (row,), _ = _media([_record(conversation("bern.png", base64.b64encode(wav(1.0)).decode()))], tmp_path)
    plain = Record(id="p0", source="sft", text="A plain document between conversations.")
    step = tokenizer(reasoning={"start": "<think>", "end": "</think>"})
    out = list(step.run([plain, row]))
    assert [r.id for r in out] == ["p0", "c0"]                                   # shard order kept
    tokens = out[1].shards[""][0]
    text = decoded(tokens)
    image = text[text.index("<|image_start|>"):text.index("<|image_end|>") + len("<|image_end|>")]
    assert image.startswith("<|image_start|>4*4<|image_size_end|><img:") and image.count("<img:") == 16
    assert image.count("<|end_of_row|>") == 3                                   # rows separated, not closed
    audio = text[text.index("<|audio_start|>"):text.index("<|audio_end|>") + len("<|audio_end|>")]
    assert audio.count("<aud:") == 40                                          # 1 s at 40 codes per second
    assert "<|image|>" not in text and "<|audio|>" not in text
    mask = ConversationMask(vocab_dict(), "train").row(tokens)[0]
    prompt = ("<|system_start|><|system_end|><|developer_start|>Deliberation: enabled\nTool Capabilities:\n"
              "// Current weather\ntype weather = (_: {\ncity: string\n}) => any;<|developer_end|>"
              f"<|user_start|>Weather where this was taken? {image} Also listen: {audio}<|user_end|>"
              "<|assistant_start|>")
    assert runs(tokens, mask) == [
        (False, prompt),                                                        # the media are context, never targets
        (True, "<|inner_prefix|>Bern skyline; ask the tool.<|inner_suffix|>"
               '<|tools_prefix|>[{"weather": {"city": "Bern"}}]<|tools_suffix|>'),
        (False, "<|tool_output_start|>sunny<|tool_output_end|>"),
        (True, "Sunny.<|assistant_end|>"), (False, "<|endoftext|>")]
    bare = decoded(out[1].shards[".no_reasoning"][0])                           # the copy without reasoning: same media
    assert image in bare and audio in bare and "<|inner_prefix|>" not in bare and "Deliberation: disabled" in bare
    assert step.stats.notes["images"] == 1 and step.stats.notes["audios"] == 1 and step.stats.balanced()


def test_a_placeholder_media_mismatch_is_quarantined_at_tokenization(tmp_path, tokenizer):
    (tmp_path / "a.png").write_bytes(encoded(picture(3)))
    (row,), _ = _media([_record(conversation("a.png", base64.b64encode(wav()).decode()))], tmp_path)
    row.meta["media"] = row.meta["media"][::-1]                                 # kinds no longer pair up
    row.payload["media"] = row.payload["media"][::-1]
    step = tokenizer()
    assert list(step.run([row])) == [] and step.stats.quarantined == {"placeholder_mismatch": 1}


@pytest.mark.slow
def test_text_only_recipes_never_import_torch(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "a", "messages": [
        {"role": "user", "content": "<image> what is it?"}, {"role": "assistant", "content": "A cat."}],
        "images": ["cat.png"]}) + "\n")
    code = ("import sys; from curation.plan.graph import load_plan; "
            f"plan = load_plan({str(tmp_path / 'r.yaml')!r}); "
            "[n.spec for n in plan.tokenize]; "
            "from curation.plan.pipeline import build_steps, encoder_spec; "
            "build_steps([encoder_spec(plan.recipe.recipe.sources[0], plan.tokenize[0].spec['run'])], source='s', "
            "sink=None); print('torch' in sys.modules)")
    (tmp_path / "r.yaml").write_text(f"name: t\nvocabulary: {VOCAB}\nsources:\n  - name: sft\n    license: MIT\n"
                                     f"    input: {{paths: [d.jsonl], id_field: id, conversations: {{}}}}\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_expanding_media_needs_the_codecs_named_in_the_recipe(tmp_path):
    from curation.errors import RecipeError
    from curation.plan.graph import load_plan
    (tmp_path / "d.jsonl").write_text("{}\n")
    (tmp_path / "r.yaml").write_text(
        f"name: t\nvocabulary: {VOCAB}\nimage_tokenizer: {REPO}/tokenizers/curate-demo-ibq.yaml\nsources:\n"
        f"  - name: sft\n    license: MIT\n    input: {{paths: [d.jsonl], conversations: {{expand_media: [audio, image]}}}}\n")
    with pytest.raises(RecipeError, match="source 'sft' runs the audio codec but the recipe has no `audio_tokenizer`"):
        load_plan(tmp_path / "r.yaml")


def test_recipe_validation_of_media_settings():
    from pydantic import ValidationError

    from curation.recipe.schema import Source
    base = {"name": "s", "license": "MIT", "input": {"paths": ["x.jsonl"]}}
    with pytest.raises(ValidationError, match="apply only to conversations that expand them"):
        Source.model_validate(base | {"images": {"area": 4096}})
    ok = Source.model_validate(base | {"images": {"area": 4096}, "input": {
        "paths": ["x.jsonl"], "conversations": {"expand_media": ["image"]}}})
    assert ok.input.conversations.expand_media == ["image"]
    with pytest.raises(ValidationError, match="lists a kind twice"):
        Source.model_validate(base | {"input": {"paths": ["x"], "conversations": {"expand_media": ["audio", "audio"]}}})


def test_the_process_fingerprint_covers_the_media_files_conversations_refer_to(tmp_path):
    from curation.recipe.schema import Source
    from curation.steps.text.modality import media_files
    (tmp_path / "a.png").write_bytes(encoded(picture(1)))
    (tmp_path / "d.jsonl").write_text(json.dumps(conversation("a.png", base64.b64encode(wav()).decode())) + "\n")
    src = Source.model_validate({"name": "s", "license": "MIT", "input": {
        "paths": ["d.jsonl"], "conversations": {"expand_media": ["image", "audio"]}}})
    before = media_files(src, tmp_path / "d.jsonl")
    (tmp_path / "a.png").write_bytes(encoded(picture(2)))
    assert media_files(src, tmp_path / "d.jsonl") != before
    plain = Source.model_validate({"name": "s", "license": "MIT", "input": {"paths": ["d.jsonl"], "conversations": {}}})
    assert media_files(plain, tmp_path / "d.jsonl") is None
