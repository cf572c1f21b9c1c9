from switchyard.llm.backend import MESSAGE_OVERHEAD_TOKENS, fit_messages


def words(text: str) -> int:
    return len(text.split())


class TestFitMessages:
    def test_a_prompt_that_fits_is_left_alone(self):
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a b c"}]
        assert fit_messages(messages, 100, words) is messages

    def test_the_longest_message_is_shortened_until_the_counted_prompt_fits(self):
        long = " ".join(f"w{i}" for i in range(2000))
        messages = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": long},
            {"role": "assistant", "content": "ok then"},
        ]
        fitted = fit_messages(messages, 300, words)
        assert sum(words(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in fitted) <= 300
        assert fitted[0] == messages[0] and fitted[2] == messages[2]
        assert long.startswith(fitted[1]["content"]) and len(fitted[1]["content"]) > 200
        assert messages[1]["content"] == long  # the caller's messages are not modified

    def test_the_first_200_characters_are_kept(self):
        messages = [{"role": "user", "content": "x " * 1000}]
        assert len(fit_messages(messages, 10, words)[0]["content"]) == 200
