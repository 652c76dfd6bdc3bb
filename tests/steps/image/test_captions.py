import pytest

from curation.steps.image.captions import caption_problem


@pytest.mark.parametrize("text, problem", [
    ("A brown dog runs across a grassy field toward a red ball.", None),
    ("In this image, I can see a harbour with three sailing boats at sunset.", None),
    ("The chart shows sales in 2019, 2020 and 2021 for four regions.", None),
    ("", "empty_caption"), ("  ...  ", "empty_caption"), (None, "empty_caption"),
    ("a very very very very very very tall tower", "token_loop"),
    ("the cat and the hat the cat and the hat the cat and the hat the cat and the hat", "repetitive_caption"),
    ("Coordinates: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14", "runaway_numbers"),
    ("A beach. The sea is calm. The sea is calm. The sea is calm.", "repeated_ending"),
    ("Describe the image in detail. A cat sleeps on a sofa.", "prompt_fragment"),
    ("As an AI, I cannot see images, but this seems to be a cat.", "prompt_fragment"),
    ("USER: <image> What is shown? ASSISTANT: a cat", "prompt_fragment"),
])
def test_caption_checks(text, problem):
    assert caption_problem(text) == problem
