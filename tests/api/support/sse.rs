//! The fake provider's streamed answers: the server-sent events of the
//! Anthropic Messages and Chat Completions wires, as the providers send
//! them when a request asks for `"stream": true`.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::provider::{ANTHROPIC_TOKENS, Call, OPENAI_TOKENS, Wire, echoed_model};

/// `text` in the pieces the fake streams it in (three, at spaces).
pub fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let size = words.len().div_ceil(3).max(1);
    words.chunks(size).map(|c| c.concat()).collect()
}

/// The server-sent events of a streamed answer, as the provider sends them;
/// `complete: false` stops after the first piece, without the end events.
pub fn stream_events(call: &Call, text: &str, complete: bool) -> Vec<String> {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let chunk = |delta: Value, finish: Value| {
        let data = json!({
            "id": format!("chatcmpl-fake-{}", call.n), "object": "chat.completion.chunk",
            "created": 1_741_569_952, "model": echoed_model(Wire::OpenAi, &call.model),
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        format!("data: {data}\n\n")
    };
    let mut pieces = pieces(text);
    if !complete {
        pieces.truncate(1);
    }
    let mut events = Vec::new();
    match call.wire {
        Wire::Anthropic => {
            events.push(event(
                "message_start",
                json!({"type": "message_start", "message": {
                "id": format!("msg_fake_{}", call.n), "type": "message", "role": "assistant",
                "model": echoed_model(Wire::Anthropic, &call.model), "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": ANTHROPIC_TOKENS.0, "output_tokens": 1}}}),
            ));
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start",
                "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            events.push(event("ping", json!({"type": "ping"})));
            for piece in pieces {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta",
                    "index": 0, "delta": {"type": "text_delta", "text": piece}}),
                ));
            }
            if complete {
                events.push(event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ));
                events.push(event(
                    "message_delta",
                    json!({"type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                    "usage": {"output_tokens": ANTHROPIC_TOKENS.1}}),
                ));
                events.push(event("message_stop", json!({"type": "message_stop"})));
            }
        }
        Wire::OpenAi => {
            events.push(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ));
            for piece in pieces {
                events.push(chunk(json!({"content": piece}), Value::Null));
            }
            if complete {
                events.push(chunk(json!({}), json!("stop")));
                let usage = json!({
                    "id": format!("chatcmpl-fake-{}", call.n), "object": "chat.completion.chunk",
                    "model": echoed_model(Wire::OpenAi, &call.model), "choices": [],
                    "usage": {"prompt_tokens": OPENAI_TOKENS.0, "completion_tokens": OPENAI_TOKENS.1,
                              "total_tokens": OPENAI_TOKENS.0 + OPENAI_TOKENS.1},
                });
                events.push(format!("data: {usage}\n\n"));
                events.push("data: [DONE]\n\n".to_owned());
            }
        }
    }
    events
}

/// A `text/event-stream` response sending `events` as separate chunks.
pub fn event_stream(events: Vec<String>) -> Response {
    let chunks = futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, std::convert::Infallible>(Bytes::from(e))),
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream")],
        axum::body::Body::from_stream(chunks),
    )
        .into_response()
}
