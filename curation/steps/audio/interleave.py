"""Paired speech-text sequences (Apertus 1.5, 2.2.4): interleaved sequences from the transcribed
clips of a recording, transcription pairs and translation pairs.

Pure and deterministic: clips (codec codes + transcript and translation token ids) in, token
sequences out.

Token layout
------------
An audio segment is ``audio_start, block("audio").start + codes..., audio_end`` (`audio_tokens`);
a text segment is the transcript's text ids, nothing around them. Between two segments stands one
task-control marker: ``speech_to_text`` after audio before text (S below), ``text_to_speech``
after text before audio (T); a transcription pair has its own task marker, ``speech_transcribe``
(R), since transcribing a clip is another task than continuing speech into the next clip's text.
Every sequence ends with a text segment followed by ``eod``.
Writing ``aK`` for the audio of clip K and ``tK`` for its transcript.

Runs (`runs`)
-------------
Clips are grouped by ``recording`` and sorted by ``order``. A run is a maximal stretch in which
each clip's ``order`` is the previous one's plus 1 and, when ``max_gap`` is given, the silence
between them (``start - (prev.start + prev.duration)``) is at most ``max_gap`` seconds. The
default ``max_gap=None`` trusts the order numbers alone: corpora such as VoxPopuli number the
segments of a session, and a dropped segment already shows up as a missing number; the time bound
is for corpora whose numbering skips nothing across long pauses. Clips without a transcript or
without codes are not transcribed clips: they are left out, and because their order number is
then missing they also end the run they were in. Two clips with the same (recording, order) or
the same id are an error.

Sequences of a run (`interleave`)
---------------------------------
For a run c0..c(n-1) with n >= 3 two copies are built whose alternations start one clip apart:

* copy A starts with the audio of clip 0: a0 S t1 T a2 S t3 ... (clip i as audio iff i is even);
* copy B is shifted by one clip, its audio starts at clip 1: t0 T a1 S t2 T a3 ...
  (clip i as audio iff i is odd). It opens with clip 0's transcript, which has no preceding
  audio, so that clip 0's text is not lost.

So every clip that is audio in one copy is text in the other. Exactly one copy would end with
the audio of the last clip (A when n is odd, B when n is even); that audio is dropped from the
copy so that it ends with text, and the last clip is the run's *leftover*: it becomes a
transcription pair ``a(n-1) R t(n-1) eod``. Runs of one clip become one transcription pair;
runs of two clips become two (copy B would be the lone transcript ``t0``, with no speech in it).
Sequences are returned as A, B, then the transcription pair(s).

Worked example, 4 clips (orders 0..3)::

    A  a0 S t1 T a2 S t3 eod
    B  t0 T a1 S t2 eod          (a3 would end B with audio: dropped, clip 3 is the leftover)
    P  a3 S t3 eod
    audio: c0 A, c1 B, c2 A, c3 P          text: c0 B, c1 A, c2 B, c3 A and P

Worked example, 5 clips (orders 0..4)::

    A  a0 S t1 T a2 S t3 eod     (a4 would end A with audio: dropped, clip 4 is the leftover)
    B  t0 T a1 S t2 T a3 S t4 eod
    P  a4 S t4 eod
    audio: c0 A, c1 B, c2 A, c3 B, c4 P    text: c0 B, c1 A, c2 B, c3 A, c4 B and P

Guarantee: every clip of a run appears exactly once as audio; every clip appears exactly once as
text, except the leftover of a run of >= 3 clips, whose transcript appears twice (in a copy and
in its transcription pair). "Exactly once as audio and once as text" for every clip cannot be
met together with "every sequence ends with text": an alternating sequence that ends with text
holds as many audio as text segments if it starts with audio and one text more if it starts with
text, and a transcription pair holds one of each; so exact coverage needs every sequence to start
with audio, in which each audio is followed by the next clip's text, i.e. a bijection
audio(i) -> text(i or i+1), and the only such bijection is the identity: transcription pairs
only, no interleaving. One surplus transcript per run is the least this layout can cost.

Translation pairs (`translation`)
---------------------------------
A clip whose manifest line carries a translation of its speech (audio in one language, text in
another) also becomes ``a(K) X x(K) eod``, where X is the ``speech_translate`` task-control marker
and xK the translation's text ids: the layout of swiss-ai's direct audio-text sequences, whose
task token (``stt_translate``) takes the place that ``speech_transcribe`` has in a transcription pair.
The target language is not spelled in the sequence (neither does that layout), so a source has
one target language (`audio.translation_language`), as swiss-ai's translate sets do (X→English).
Translation pairs stand beside the clip's transcription or interleaved sequences (the same audio
then occurs in both, as when the two corpora are tokenized separately); they take no part in runs.
One speech in several target languages cannot be expressed: the same audio in a second source is an
audio duplicate (dedup across sources keeps the first copy).

Pools and targets
-----------------
``pool`` is "stage2" when ``len(tokens)`` (eod included) is at most ``max_len`` (8,192) and
"long_context" otherwise. ``control_positions`` are the indices of the speech_to_text /
text_to_speech / speech_translate markers in ``tokens``: they condition the model but are never prediction targets
(Apertus 1.5, 3.2), so a trainer drops those positions from the loss (``control_mask``).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from curation.core.vocab import Vocabulary

MAX_LEN = 8192
STAGE2, LONG_CONTEXT = "stage2", "long_context"
INTERLEAVED, TRANSCRIPTION, TRANSLATION = "interleaved", "transcription", "translation"
AUDIO, TEXT = "audio", "text"
# the task-control markers of paired speech: conditions, never prediction targets (curation.train.targets)
CONTROL_MARKERS = ("speech_to_text", "text_to_speech", "speech_translate", "speech_transcribe")


@dataclass(frozen=True, eq=False)
class Clip:
    id: str
    recording: str
    order: int
    start: float        # seconds from the start of the recording
    duration: float     # seconds
    codes: np.ndarray   # codec codes, 0..audio block size - 1
    text: np.ndarray    # transcript as text token ids
    translation: np.ndarray | None = None   # the speech translated into another language, as text ids

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def transcribed(self) -> bool:
        return len(self.text) > 0 and len(self.codes) > 0


@dataclass(eq=False)
class Sequence:
    tokens: np.ndarray                       # int32, last token is vocab.eod_id
    kind: str                                # "interleaved" | "transcription" | "translation"
    clip_ids: tuple[str, ...]                # clips in order of first appearance
    layout: tuple[tuple[str, str], ...]      # (clip id, "audio" | "text" | "translation") per segment
    control_positions: np.ndarray            # int64 indices of the task-control markers
    pool: str                                # "stage2" | "long_context"

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def control_mask(self) -> np.ndarray:
        """True at the task-control markers: the positions a trainer excludes from the targets."""
        mask = np.zeros(len(self.tokens), dtype=bool)
        mask[self.control_positions] = True
        return mask


def audio_tokens(codes: np.ndarray, vocab: Vocabulary) -> np.ndarray:
    """``audio_start, block("audio").start + codes, audio_end`` as int32."""
    codes = np.asarray(codes)
    block = vocab.block(AUDIO)
    if codes.ndim != 1 or (codes.size and not np.issubdtype(codes.dtype, np.integer)):
        raise ValueError(f"audio codes must be a 1-D integer array, got {codes.dtype} of shape {codes.shape}")
    if codes.size and (codes.min() < 0 or codes.max() >= block.size):
        raise ValueError(f"audio codes must lie in 0..{block.size - 1}, got {codes.min()}..{codes.max()}")
    out = np.empty(codes.size + 2, dtype=np.int32)
    out[0], out[-1] = vocab.marker("audio_start"), vocab.marker("audio_end")
    out[1:-1] = codes.astype(np.int64) + block.start
    return out


def runs(clips: Iterable[Clip], max_gap: float | None = None) -> list[list[Clip]]:
    """Runs of consecutive transcribed clips, per recording; see the module docstring.

    Returned sorted by recording, then by order; each run sorted by order.
    """
    by_rec: dict[str, list[Clip]] = {}
    ids: set[str] = set()
    for c in clips:
        if c.id in ids:
            raise ValueError(f"clip id {c.id!r} occurs twice")
        ids.add(c.id)
        by_rec.setdefault(c.recording, []).append(c)
    out: list[list[Clip]] = []
    for rec in sorted(by_rec):
        cs = sorted(by_rec[rec], key=lambda c: c.order)
        for a, b in zip(cs, cs[1:]):
            if a.order == b.order:
                raise ValueError(f"recording {rec!r}: clips {a.id!r} and {b.id!r} share order {a.order}")
        run: list[Clip] = []
        for c in cs:
            if not c.transcribed:
                if run:
                    out.append(run)
                run = []
                continue
            if run and (c.order != run[-1].order + 1
                        or (max_gap is not None and c.start - run[-1].end > max_gap)):
                out.append(run)
                run = []
            run.append(c)
        if run:
            out.append(run)
    return out


def _text_tokens(clip: Clip, vocab: Vocabulary, what: str = "transcript") -> np.ndarray:
    text = np.asarray(clip.text if what == "transcript" else clip.translation)
    if text.ndim != 1 or not text.size or not np.issubdtype(text.dtype, np.integer):
        raise ValueError(f"clip {clip.id!r}: {what} must be a non-empty 1-D array of text ids")
    size = vocab.block(TEXT).size
    if text.min() < 0 or text.max() >= size:
        raise ValueError(f"clip {clip.id!r}: {what} ids must lie in the text block 0..{size - 1}")
    if (text == vocab.eod_id).any():
        raise ValueError(f"clip {clip.id!r}: {what} contains the end-of-document token")
    return text.astype(np.int32)


def _assemble(segments: list[tuple[Clip, str]], kind: str, vocab: Vocabulary, max_len: int,
              s2t: str = "speech_to_text") -> Sequence:
    if s2t not in vocab.reserved:
        raise ValueError(f"vocabulary {vocab.id} names no {s2t!r} marker; add it in a free slot of its reserved "
                         f"block ({vocab.path}): transcription pairs need their own task marker")
    s2t, t2s = vocab.marker(s2t), vocab.marker("text_to_speech")
    parts: list[np.ndarray] = []
    control: list[int] = []
    pos = 0
    for i, (clip, modality) in enumerate(segments):
        if i:
            control.append(pos)
            parts.append(np.array([s2t if modality == TEXT else t2s], dtype=np.int32))
            pos += 1
        if not len(np.asarray(clip.codes)):
            raise ValueError(f"clip {clip.id!r} has no audio codes")
        seg = audio_tokens(clip.codes, vocab) if modality == AUDIO else _text_tokens(clip, vocab)
        parts.append(seg)
        pos += len(seg)
    parts.append(np.array([vocab.eod_id], dtype=np.int32))
    tokens = np.concatenate(parts)
    clip_ids = tuple(dict.fromkeys(c.id for c, _ in segments))
    return Sequence(tokens=tokens, kind=kind, clip_ids=clip_ids,
                    layout=tuple((c.id, m) for c, m in segments),
                    control_positions=np.array(control, dtype=np.int64),
                    pool=STAGE2 if len(tokens) <= max_len else LONG_CONTEXT)


def transcription(clip: Clip, vocab: Vocabulary, max_len: int = MAX_LEN) -> Sequence:
    """``audio(clip) speech_transcribe transcript(clip) eod``: the transcription task has its own marker,
    so it is not read as a continuation of interleaved speech (``speech_to_text``)."""
    return _assemble([(clip, AUDIO), (clip, TEXT)], TRANSCRIPTION, vocab, max_len, s2t="speech_transcribe")


def translation(clip: Clip, vocab: Vocabulary, max_len: int = MAX_LEN) -> Sequence:
    """``audio(clip) speech_translate translation(clip) eod``; see the module docstring."""
    if clip.translation is None:
        raise ValueError(f"clip {clip.id!r} has no translation")
    if not len(np.asarray(clip.codes)):
        raise ValueError(f"clip {clip.id!r} has no audio codes")
    audio = audio_tokens(clip.codes, vocab)
    tokens = np.concatenate([audio, np.array([vocab.marker("speech_translate")], dtype=np.int32),
                             _text_tokens(clip, vocab, "translation"), np.array([vocab.eod_id], dtype=np.int32)])
    return Sequence(tokens=tokens, kind=TRANSLATION, clip_ids=(clip.id,),
                    layout=((clip.id, AUDIO), (clip.id, TRANSLATION)),
                    control_positions=np.array([len(audio)], dtype=np.int64),
                    pool=STAGE2 if len(tokens) <= max_len else LONG_CONTEXT)


def interleave(run: list[Clip], vocab: Vocabulary, max_len: int = MAX_LEN) -> list[Sequence]:
    """Copies A and B of a run and its transcription pair(s); see the module docstring."""
    if not run:
        raise ValueError("empty run")
    for a, b in zip(run, run[1:]):
        if b.recording != a.recording or b.order != a.order + 1:
            raise ValueError(f"not a run of consecutive clips: {a.id!r} ({a.recording}, {a.order}) "
                             f"then {b.id!r} ({b.recording}, {b.order})")
    n = len(run)
    if n <= 2:
        return [transcription(c, vocab, max_len) for c in run]
    copies = []
    for first_audio in (0, 1):       # A: clip i is audio iff i is even; B: iff i is odd
        segs = [(c, AUDIO if i % 2 == first_audio else TEXT) for i, c in enumerate(run)]
        if segs[-1][1] == AUDIO:     # must end with text: the last clip's audio is the leftover
            segs.pop()
        copies.append(_assemble(segs, INTERLEAVED, vocab, max_len))
    return copies + [transcription(run[-1], vocab, max_len)]


def build(clips: Iterable[Clip], vocab: Vocabulary, max_gap: float | None = None,
          max_len: int = MAX_LEN) -> list[Sequence]:
    """`interleave` over every run of `clips`, in the order of `runs`."""
    return [s for r in runs(clips, max_gap) for s in interleave(r, vocab, max_len)]
