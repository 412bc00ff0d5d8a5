"""The OpenAI request bodies the gateway accepts, written once as field specs
(``operations/fields.py``): the operations check bodies with them and
``api/openapi.py`` publishes them as ``GET /openapi.json``.

Types and ranges follow OpenAI's API reference. Fields nobody here knows are passed
to the upstream unchecked: vLLM and SGLang take many sampling extras, and a gateway
that refused every field it had not heard of would break them on each release. The
extras that vLLM and SGLang document (``top_k``, ``min_p``, ``repetition_penalty``,
``chat_template_kwargs``, ...) are listed, so their types are checked like the rest.
"""

from __future__ import annotations

from tokenplane.operations.context_fields import extension, message_marks
from tokenplane.operations.fields import (
    Arr,
    Bool,
    Enum,
    Int,
    Map,
    Num,
    Obj,
    OneOf,
    Spec,
    Str,
    Tagged,
)
from tokenplane.tokens.prompt_batch import MAX_CHOICES, MAX_PROMPTS

INT64 = (-(1 << 63), (1 << 63) - 1)
_SCHEMA = Obj({}, description="a JSON Schema object")
# the range of a token id is checked against the model's vocabulary (tokens/ids.py)
_TOKEN_ID = Int(description="a token id of the model's vocabulary")


def _stop() -> Spec:
    return OneOf(Str(), Arr(Str(), max_items=4),
                 label="a string or an array of up to 4 strings",
                 description="up to 4 sequences where the model stops")


def _stream_options() -> Obj:
    return Obj({"include_usage": Bool(), "continuous_usage_stats": Bool(),
                "include_obfuscation": Bool()},
               description="only with stream: true")


def _sampling() -> dict[str, Spec]:
    """What chat completions and completions share (OpenAI's, then vLLM/SGLang extras)."""
    return {
        "model": Str(min_len=1, description="a model alias this key may use"),
        "stream": Bool(),
        "stream_options": _stream_options(),
        "max_tokens": Int(1),
        "max_completion_tokens": Int(1),
        "n": Int(1, 128),
        "seed": Int(*INT64),
        "temperature": Num(0, 2),
        "top_p": Num(0, 1),
        "presence_penalty": Num(-2, 2),
        "frequency_penalty": Num(-2, 2),
        "logit_bias": Map(Num(-100, 100), digits=True,
                          description="token id (as a string) -> bias from -100 to 100"),
        "stop": _stop(),
        "user": Str(),
        "metadata": Map(Str(max_len=512), max_items=16),
        "store": Bool(),
        "service_tier": Enum("auto", "default", "flex", "scale", "priority"),
        "prompt_cache_key": Str(),
        "safety_identifier": Str(),
        # vLLM / SGLang sampling extras
        "top_k": Int(-1),
        "min_p": Num(0, 1),
        "repetition_penalty": Num(0),
        "length_penalty": Num(),
        "min_tokens": Int(0),
        "ignore_eos": Bool(),
        "skip_special_tokens": Bool(),
        "spaces_between_special_tokens": Bool(),
        "include_stop_str_in_output": Bool(),
        "stop_token_ids": Arr(Int(0)),
        "bad_words": Arr(Str()),
        "truncate_prompt_tokens": Int(-1),
        "add_special_tokens": Bool(),
        "guided_json": OneOf(Str(), Obj({})),
        "guided_regex": Str(),
        "guided_choice": Arr(Str()),
        "guided_grammar": Str(),
        "structured_outputs": Obj({}),
        "priority": Int(*INT64),
        "request_id": Str(),
        "return_tokens_as_token_ids": Bool(),
    }


# -- chat completions -------------------------------------------------------------------

def _text_part() -> Obj:
    return Obj({"text": Str()}, ("text",))


def _content_part() -> Tagged:
    url = Obj({"url": Str()}, ("url",))
    return Tagged("type", {
        "text": _text_part(),
        "image_url": Obj({"image_url": Obj({"url": Str(), "detail": Enum("auto", "low", "high")},
                                           ("url",))}, ("image_url",)),
        "input_audio": Obj({"input_audio": Obj({"data": Str(), "format": Enum("wav", "mp3")},
                                               ("data", "format"))}, ("input_audio",)),
        "file": Obj({"file": Obj({"file_data": Str(), "file_id": Str(), "filename": Str()})},
                    ("file",)),
        "refusal": Obj({"refusal": Str()}, ("refusal",)),
        # vLLM's multimodal parts
        "audio_url": Obj({"audio_url": url}, ("audio_url",)),
        "video_url": Obj({"video_url": Obj({"url": Str()}, ("url",))}, ("video_url",)),
    })


def _content(label: str) -> Spec:
    return OneOf(Str(), Arr(_content_part()), label=label)


def _tool_call() -> Tagged:
    return Tagged("type", {"function": Obj({
        "id": Str(),
        "function": Obj({"name": Str(), "arguments": Str()}, ("name",)),
    }, ("function",))})


def _messages() -> Arr:
    parts = "a string or an array of content parts"
    name = Str()
    marks = message_marks()
    message = Tagged("role", {
        "system": Obj({"content": _content(parts), "name": name, "tokenplane": marks},
                      ("content",)),
        "developer": Obj({"content": _content(parts), "name": name, "tokenplane": marks},
                         ("content",)),
        "user": Obj({"content": _content(parts), "name": name, "tokenplane": marks},
                    ("content",)),
        "assistant": Obj({
            "tokenplane": marks,
            "content": _content(parts), "name": name, "refusal": Str(),
            "tool_calls": Arr(_tool_call()),
            "function_call": Obj({"name": Str(), "arguments": Str()}, ("name",)),
            "audio": Obj({"id": Str()}, ("id",)),
            "reasoning_content": Str(),
        }, description="content is required unless tool_calls or function_call is set"),
        "tool": Obj({"content": _content(parts), "tool_call_id": Str(), "tokenplane": marks},
                    ("content",)),
        "function": Obj({"content": Str(), "name": name, "tokenplane": marks},
                        ("content",)),
    })
    return Arr(message, min_items=1)


def chat_messages() -> Arr:
    """The ``messages`` of a chat body (also of ``POST /v1/context/pack``)."""
    return _messages()


def _function() -> Obj:
    return Obj({"name": Str(min_len=1), "description": Str(), "parameters": _SCHEMA,
                "strict": Bool()}, ("name",))


def _tool_choice() -> Spec:
    named = Tagged("type", {"function": Obj({"function": Obj({"name": Str()}, ("name",))},
                                            ("function",))})
    return OneOf(Enum("none", "auto", "required"), named,
                  label="'none', 'auto', 'required' or a named tool object")


def _response_format() -> Tagged:
    return Tagged("type", {
        "text": Obj({}),
        "json_object": Obj({}),
        "json_schema": Obj({"json_schema": Obj({
            "name": Str(min_len=1, max_len=64), "description": Str(), "schema": _SCHEMA,
            "strict": Bool()}, ("name",))}, ("json_schema",)),
    })


def chat_body() -> Obj:
    return Obj({
        **_sampling(),
        "messages": _messages(),
        "logprobs": Bool(),
        "top_logprobs": Int(0, 20),
        "response_format": _response_format(),
        "tools": Arr(Tagged("type", {"function": Obj({"function": _function()},
                                                      ("function",))})),
        "tool_choice": _tool_choice(),
        "parallel_tool_calls": Bool(),
        "functions": Arr(_function()),
        "function_call": OneOf(Enum("none", "auto"), Obj({"name": Str()}, ("name",)),
                               label="'none', 'auto' or an object with a name"),
        "modalities": Arr(Enum("text", "audio")),
        "audio": Obj({"voice": Str(), "format": Enum("wav", "aac", "mp3", "flac", "opus",
                                                     "pcm16")}, ("voice", "format")),
        "prediction": Tagged("type", {"content": Obj({"content": _content(
            "a string or an array of text parts")}, ("content",))}),
        "reasoning_effort": Enum("none", "minimal", "low", "medium", "high", "xhigh"),
        "verbosity": Enum("low", "medium", "high"),
        "web_search_options": Obj({}),
        # vLLM / SGLang chat extras
        "chat_template": Str(),
        "chat_template_kwargs": Obj({}),
        "add_generation_prompt": Bool(),
        "continue_final_message": Bool(),
        "echo": Bool(),
        "documents": Arr(Obj({})),
        "mm_processor_kwargs": Obj({}),
        "separate_reasoning": Bool(),
        # tokenplane's own (docs/CONTEXT.md); removed before the upstream
        "tokenplane": extension(),
    }, ("model", "messages"))


# -- completions ------------------------------------------------------------------------

def completion_body() -> Obj:
    return Obj({
        **_sampling(),
        "prompt": OneOf(Str(), Arr(Str(), 1, MAX_PROMPTS), Arr(_TOKEN_ID, 1),
                        Arr(Arr(_TOKEN_ID, 1), 1, MAX_PROMPTS),
                        label="a string, an array of strings, an array of token ids or an "
                              "array of arrays of token ids",
                        description=f"one prompt, or a batch of up to {MAX_PROMPTS} (each "
                                    "answered n times, choice prompt_index * n + i; at "
                                    f"most {MAX_CHOICES} choices in all)"),
        "logprobs": Int(0, 5),
        "echo": Bool(),
        "best_of": Int(1, 20),
        "suffix": Str(),
    }, ("model", "prompt"))


# -- embeddings -------------------------------------------------------------------------

def embedding_body() -> Obj:
    return Obj({
        "model": Str(min_len=1, description="a model alias this key may use"),
        "input": OneOf(Str(), Arr(Str(), 1, 2048), Arr(_TOKEN_ID, 1),
                       Arr(Arr(_TOKEN_ID, 1), 1, 2048),
                       label="a string, an array of strings, an array of token ids or an "
                             "array of arrays of token ids"),
        "encoding_format": Enum("float", "base64"),
        "dimensions": Int(1),
        "user": Str(),
        # vLLM extras
        "truncate_prompt_tokens": Int(-1),
        "add_special_tokens": Bool(),
        "normalize": Bool(),
        "priority": Int(*INT64),
        "request_id": Str(),
    }, ("model", "input"))
