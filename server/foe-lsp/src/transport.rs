//! The byte streams between the client and tower-lsp, hardened: tower-lsp ends the session at the first message
//! it cannot decode, so every message is framed and checked here first. A body that is not JSON is answered
//! with the JSON-RPC parse error (-32700), one that is not a JSON-RPC message with invalid request (-32600),
//! a header without a length with the parse error and a search for the next header; `"params": null` is
//! dropped (as if absent, so `shutdown` with null params works); valid messages pass through unchanged.
//! Answers of tower-lsp and of this layer go out whole, one after the other.

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Largest header section accepted (a line longer than this is not a header).
const MAX_HEADER_BYTES: usize = 8 << 10;
/// Largest message body accepted (a whole C file as text fits many times).
const MAX_BODY_BYTES: usize = 64 << 20;
/// Room for messages in flight between the tasks.
const PIPE_BYTES: usize = 1 << 20;

/// Connects the client's `input` and `output` to a pair of in-process streams for tower-lsp; the returned
/// task ends when the client's input ends (tower-lsp then sees end of input) and all answers are written.
pub fn harden<I, O>(
    input: I,
    output: O,
) -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (server_in, mut to_server) = tokio::io::duplex(PIPE_BYTES);
    let (from_server, server_out) = tokio::io::duplex(PIPE_BYTES);
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(frame) = rx.recv().await {
            if output.write_all(&frame).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let answers = tx.clone();
    let server_side = tokio::spawn(async move {
        let mut reader = BufReader::new(from_server);
        loop {
            match read_frame(&mut reader).await {
                Frame::Message(body) => {
                    if answers.send(frame(&body)).is_err() {
                        break;
                    }
                }
                Frame::BadHeader | Frame::TooLarge(_) => continue,
                Frame::End => break,
            }
        }
    });
    let client_side = tokio::spawn(async move {
        let mut reader = BufReader::new(input);
        loop {
            match read_frame(&mut reader).await {
                Frame::Message(body) => match check(&body) {
                    Ok(message) => {
                        if to_server.write_all(&frame(&message)).await.is_err() {
                            break;
                        }
                    }
                    Err(answer) => {
                        tracing::warn!("answered a malformed message: {}", answer["error"]);
                        let _ = tx.send(frame(answer.to_string().as_bytes()));
                    }
                },
                Frame::BadHeader => {
                    tracing::warn!("a message without a valid Content-Length header");
                    let _ = tx.send(frame(
                        error(
                            Value::Null,
                            -32700,
                            "Parse error: no valid Content-Length header",
                        )
                        .to_string()
                        .as_bytes(),
                    ));
                }
                Frame::TooLarge(n) => {
                    let _ = tx.send(frame(
                        error(
                            Value::Null,
                            -32700,
                            &format!("Parse error: a body of {n} bytes is too large"),
                        )
                        .to_string()
                        .as_bytes(),
                    ));
                    // The body cannot be skipped without reading it all: the framing is lost.
                    break;
                }
                Frame::End => break,
            }
        }
        let _ = to_server.shutdown().await;
    });
    let task = tokio::spawn(async move {
        let _ = client_side.await;
        let _ = server_side.await;
        let _ = writer.await;
    });
    (server_in, server_out, task)
}

enum Frame {
    Message(Vec<u8>),
    /// A header section without a usable Content-Length (the reader moved past it).
    BadHeader,
    TooLarge(usize),
    End,
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Reads one header section and its body.
async fn read_frame<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> Frame {
    let mut length: Option<usize> = None;
    let mut bad = false;
    let mut header_bytes = 0;
    let mut saw_header = false;
    loop {
        let mut line = Vec::new();
        let read = (&mut *reader)
            .take((MAX_HEADER_BYTES + 1) as u64)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return Frame::End,
            Ok(_) => {}
        }
        header_bytes += line.len();
        if header_bytes > MAX_HEADER_BYTES {
            bad = true;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if !saw_header {
                // Blank lines between messages are skipped.
                continue;
            }
            break;
        }
        saw_header = true;
        match text.split_once(':') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<usize>() {
                    Ok(n) => length = Some(n),
                    Err(_) => bad = true,
                }
            }
            Some(_) => {}
            None => bad = true,
        }
    }
    let Some(length) = length.filter(|_| !bad) else {
        return Frame::BadHeader;
    };
    if length > MAX_BODY_BYTES {
        return Frame::TooLarge(length);
    }
    let mut body = vec![0; length];
    match reader.read_exact(&mut body).await {
        Ok(_) => Frame::Message(body),
        // A body cut short by the end of input: nothing more will come.
        Err(_) => Frame::End,
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// The message to pass on (normalised), or the error answer to send instead.
fn check(body: &[u8]) -> Result<Vec<u8>, Value> {
    let mut value: Value = serde_json::from_slice(body)
        .map_err(|e| error(Value::Null, -32700, &format!("Parse error: {e}")))?;
    let Some(object) = value.as_object_mut() else {
        return Err(error(Value::Null, -32600, "Invalid Request: not an object"));
    };
    let id = object.get("id").cloned();
    let id_ok = match &id {
        None => true,
        Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
        Some(Value::String(_)) => true,
        Some(_) => false,
    };
    let answer_id = id.clone().filter(|_| id_ok).unwrap_or(Value::Null);
    let invalid = |why: &str| {
        error(
            answer_id.clone(),
            -32600,
            &format!("Invalid Request: {why}"),
        )
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    if !id_ok {
        return Err(invalid("id must be a number or a string"));
    }
    match object.get("method") {
        Some(Value::String(_)) => match object.get("params") {
            None | Some(Value::Object(_)) | Some(Value::Array(_)) => {}
            Some(Value::Null) => {
                object.remove("params");
            }
            Some(_) => return Err(invalid("params must be an object or an array")),
        },
        Some(_) => return Err(invalid("method must be a string")),
        None => {
            // A response to one of the server's requests.
            let has_outcome = object.contains_key("result") || object.contains_key("error");
            if id.is_none() || !has_outcome {
                return Err(invalid("neither a request, a notification nor a response"));
            }
        }
    }
    serde_json::to_vec(&value).map_err(|e| error(Value::Null, -32700, &e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_messages() {
        assert_eq!(check(b"{").unwrap_err()["error"]["code"], -32700);
        assert_eq!(check(b"\xff\xfe").unwrap_err()["error"]["code"], -32700);
        assert_eq!(check(b"[1]").unwrap_err()["error"]["code"], -32600);
        let e = check(br#"{"jsonrpc":"2.0","id":4,"method":7}"#).unwrap_err();
        assert_eq!(
            (e["id"].clone(), e["error"]["code"].clone()),
            (json!(4), json!(-32600))
        );
        let ok = check(br#"{"jsonrpc":"2.0","id":1,"method":"shutdown","params":null}"#).unwrap();
        let ok: Value = serde_json::from_slice(&ok).unwrap();
        assert!(ok.get("params").is_none());
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"result":null}"#).is_ok());
    }

    #[tokio::test]
    async fn frames_survive_garbage() {
        let input: &[u8] = b"Content-Length: 2\r\n\r\n{}garbage\r\n\r\nContent-Length: 17\r\n\r\n{\"jsonrpc\":\"2.0\"}Content-Length: 5\r\n\r\n{";
        let mut reader = BufReader::new(input);
        assert!(matches!(read_frame(&mut reader).await, Frame::Message(b) if b == b"{}"));
        assert!(matches!(read_frame(&mut reader).await, Frame::BadHeader));
        assert!(matches!(read_frame(&mut reader).await, Frame::Message(_)));
        assert!(matches!(read_frame(&mut reader).await, Frame::End));
    }
}
