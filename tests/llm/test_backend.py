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

    def test_several_long_messages_are_all_cut_until_the_prompt_fits(self):
        # a conversation's earlier turns: cutting the longest to its first 200 characters is not enough
        turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"t{i} " * 400} for i in range(4)]
        messages = [{"role": "system", "content": "answer"}, *turns, {"role": "user", "content": "What year?"}]
        fitted = fit_messages(messages, 500, words)
        assert sum(words(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in fitted) <= 500
        assert [m["role"] for m in fitted] == [m["role"] for m in messages]
        assert fitted[-1]["content"] == "What year?" and fitted[0]["content"] == "answer"
        assert all(messages[i]["content"].startswith(fitted[i]["content"]) for i in range(1, 5))
        assert sum(len(m["content"]) < len(o["content"]) for m, o in zip(fitted, messages)) >= 2

    def test_the_first_200_characters_are_kept(self):
        messages = [{"role": "user", "content": "x " * 1000}]
        assert len(fit_messages(messages, 10, words)[0]["content"]) == 200

    def test_passages_are_dropped_lowest_ranked_first_and_the_question_is_kept(self):
        passages = [f"[{i}] Title {i}: " + " ".join(f"p{i}w{k}" for k in range(50)) for i in range(1, 9)]
        user = "Passages:\n" + "\n".join(passages) + "\n\nQuestion: how long is it?"
        messages = [{"role": "system", "content": "answer"}, {"role": "user", "content": user}]
        fitted = fit_messages(messages, 200, words)
        sent = fitted[1]["content"]
        assert sum(words(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in fitted) <= 200
        assert sent == "Passages:\n" + "\n".join(passages[:3]) + "\n\nQuestion: how long is it?"  # whole passages

    def test_one_passage_is_kept_and_then_cut_before_the_question(self):
        passages = [f"[{i}] " + " ".join(f"p{i}w{k}" for k in range(300)) for i in range(1, 4)]
        user = "Passages:\n" + "\n".join(passages) + "\n\nQuestion: how long is it?"
        fitted = fit_messages([{"role": "user", "content": user}], 120, words)[0]["content"]
        assert words(fitted) + MESSAGE_OVERHEAD_TOKENS <= 120
        assert fitted.startswith("Passages:\n[1] p1w0") and fitted.endswith("\nQuestion: how long is it?")
        assert "[2]" not in fitted

    def test_earlier_agent_steps_are_summarised_oldest_first_and_the_last_kept(self):
        steps = [
            f"Thought: step {i} "
            + "thinking " * 20
            + f'\nAction: {a}({{"query": "q{i}"}})\nObservation: '
            + "seen " * 30
            for i, a in enumerate(["retrieve", "rerank", "grade", "rewrite"])
        ]
        user = "Question: what?\nEarlier steps:\n" + "\n".join(steps)
        fitted = fit_messages([{"role": "user", "content": user}], 120, words)[0]["content"]
        assert words(fitted) + MESSAGE_OVERHEAD_TOKENS <= 120
        assert fitted.startswith("Question: what?\nEarlier steps:\n(3 earlier steps, observations left out: ")
        assert "retrieve, rerank, grade)" in fitted and fitted.endswith(steps[-1])

    def test_only_as_many_steps_as_needed_are_summarised(self):
        steps = [f"Thought: t{i}\nAction: retrieve\nObservation: " + "seen " * 30 for i in range(4)]
        user = "Earlier steps:\n" + "\n".join(steps)
        budget = words(user) + MESSAGE_OVERHEAD_TOKENS - 10
        fitted = fit_messages([{"role": "user", "content": user}], budget, words)[0]["content"]
        assert fitted.startswith("Earlier steps:\n(1 earlier steps, observations left out: retrieve)\nThought: t1")
