//! The scripted OpenAI-compatible HTTP server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::frames::render;
use crate::invariant::check_tool_call_pairing;
use crate::reply::Reply;

/// The model name used when a request names none.
const DEFAULT_MODEL: &str = "scripted-model";

/// One request the server received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// The request path, such as `/v1/chat/completions`.
    pub path: String,
    /// The request headers, names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; a body that is not JSON is kept as a JSON string.
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of a header (name matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Makes the reply to a request from its body, when the queue is empty.
type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// The context window `GET /v1/models` reports (`max_model_len`, as vLLM
    /// does), when set.
    context_window: Mutex<Option<u32>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in one test handler must not hide every later request.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A local OpenAI-compatible server that answers from a queue of scripted replies.
///
/// It listens on `127.0.0.1:<random port>` and serves `POST /v1/chat/completions`
/// (one queued [`Reply`] per request, in order) and `GET /v1/models`. Every chat
/// request is recorded for assertions. When the queue is empty it answers
/// `418` with `{"error":{"message":"reprise-testkit: no scripted reply left …"}}`,
/// a status no client retries, so a test that asks for more than it scripted fails
/// loudly. The server stops when the value is dropped.
///
/// ```
/// use reprise_testkit::{Reply, ScriptedCall, ScriptedServer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let server = ScriptedServer::start().await;
/// server.push(Reply::error(429, "slow down").with_header("Retry-After", "1"));
/// server.push(Reply::tool_calls([
///     ScriptedCall::new("call_1", "talk_to", r#"{"who":"smith"}"#),
///     ScriptedCall::new("call_2", "buy", r#"{"item":"torch"}"#),
/// ]));
/// server.push(Reply::text("You bought a torch.").with_usage(12, 5));
/// // point the client at server.base_url() ("http://127.0.0.1:PORT/v1"), run it, then:
/// for body in server.request_bodies() {
///     reprise_testkit::check_tool_call_pairing(&body).unwrap();
/// }
/// # }
/// ```
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl ScriptedServer {
    /// Starts a server with an empty script.
    ///
    /// # Panics
    /// When no loopback port can be bound (a broken test machine).
    pub async fn start() -> Self {
        Self::start_with(Vec::new()).await
    }

    /// Starts a server whose queue holds `replies`.
    ///
    /// # Panics
    /// When no loopback port can be bound (a broken test machine).
    pub async fn start_with(replies: impl IntoIterator<Item = Reply>) -> Self {
        let shared = Arc::new(Shared::default());
        lock(&shared.replies).extend(replies);
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(error) => panic!("reprise-testkit: cannot bind 127.0.0.1:0: {error}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(error) => panic!("reprise-testkit: no local address: {error}"),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            // A history may hold a file the model wrote: no limit below the client's.
            .layer(DefaultBodyLimit::disable())
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            // The server runs until the test drops it; an accept error ends it.
            let _ = axum::serve(listener, app).await;
        });
        ScriptedServer { addr, shared, task }
    }

    /// The base URL to give a client: `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a reply after the ones already queued.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Queues several replies in order.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.shared.replies).extend(replies);
    }

    /// Answers every request the queue has no reply for with `responder(body)`:
    /// a model whose answer depends on the history it is sent (a soak that kills
    /// and resumes its client at random cannot script the order of requests).
    pub fn answer_with(&self, responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        *lock(&self.shared.responder) = Some(Arc::new(responder));
    }

    /// Makes `GET /v1/models` report `tokens` as the model's context window
    /// (`max_model_len`, as vLLM does); by default it reports none.
    pub fn report_context_window(&self, tokens: u32) {
        *lock(&self.shared.context_window) = Some(tokens);
    }

    /// How many queued replies have not been used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.replies).len()
    }

    /// Every chat-completions request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The JSON bodies of every chat-completions request received so far, in order.
    pub fn request_bodies(&self) -> Vec<Value> {
        lock(&self.shared.requests)
            .iter()
            .map(|request| request.body.clone())
            .collect()
    }

    /// How many chat-completions requests arrived.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Checks [`check_tool_call_pairing`] on every request received so far.
    ///
    /// # Panics
    /// On the first request that breaks the invariant, naming it and the reason.
    pub fn assert_tool_call_pairing(&self) {
        for (index, body) in self.request_bodies().iter().enumerate() {
            if let Err(reason) = check_tool_call_pairing(body) {
                panic!(
                    "request #{index} breaks the tool-call pairing invariant: {reason}\n{body:#}"
                );
            }
        }
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for ScriptedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedServer")
            .field("addr", &self.addr)
            .field("remaining", &self.remaining())
            .finish()
    }
}

/// A port on 127.0.0.1 with nothing listening on it, as a base URL
/// (`http://127.0.0.1:<port>/v1`), for "no server answers" tests.
///
/// # Panics
/// When no loopback port can be bound.
pub fn unreachable_base_url() -> String {
    let listener = match std::net::TcpListener::bind("127.0.0.1:0") {
        Ok(listener) => listener,
        Err(error) => panic!("reprise-testkit: cannot bind 127.0.0.1:0: {error}"),
    };
    let port = match listener.local_addr() {
        Ok(addr) => addr.port(),
        Err(error) => panic!("reprise-testkit: no local address: {error}"),
    };
    drop(listener);
    format!("http://127.0.0.1:{port}/v1")
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let mut model = json!({"id": DEFAULT_MODEL, "object": "model", "created": 0, "owned_by": "reprise-testkit"});
    if let Some(tokens) = *lock(&shared.context_window) {
        model["max_model_len"] = json!(tokens);
    }
    axum::Json(json!({"object": "list", "data": [model]})).into_response()
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_MODEL)
        .to_owned();
    lock(&shared.requests).push(RecordedRequest {
        path: "/v1/chat/completions".to_owned(),
        headers: headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    });
    let reply = lock(&shared.replies).pop_front().or_else(|| {
        let responder = lock(&shared.responder).clone();
        let requests = lock(&shared.requests);
        let body = &requests.last()?.body;
        responder.map(|respond| respond(body))
    });
    let Some(reply) = reply else {
        return (
            StatusCode::IM_A_TEAPOT,
            axum::Json(json!({"error": {"message": "reprise-testkit: no scripted reply left for this request"}})),
        )
            .into_response();
    };
    if let Some(delay) = reply.delay {
        tokio::time::sleep(delay).await;
    }
    respond(&reply, stream, &model)
}

/// A pause before a scripted cut: while the body is pending, hyper flushes what it
/// holds, so the client really receives the head and the partial frame first.
const FLUSH_PAUSE: Duration = Duration::from_millis(10);

/// One step of a response body.
enum Step {
    Send(Bytes),
    Pause(Duration),
    Abort,
}

fn respond(reply: &Reply, stream: bool, model: &str) -> Response {
    let rendered = render(reply, stream, model);
    let mut steps = Vec::new();
    for (index, frame) in rendered.frames.into_iter().enumerate() {
        if let Some((after, pause)) = reply.stall
            && after == index
        {
            steps.push(Step::Pause(pause));
        }
        if reply.cut_after == Some(index) {
            let half = frame.len() / 2;
            if half > 0 {
                steps.push(Step::Send(frame.slice(..half)));
            }
            steps.push(Step::Pause(FLUSH_PAUSE));
            steps.push(Step::Abort);
            break;
        }
        steps.push(Step::Send(frame));
    }
    // A cut beyond the last frame: everything is sent, then the connection dies.
    if reply.cut_after.is_some() && !matches!(steps.last(), Some(Step::Abort)) {
        steps.push(Step::Pause(FLUSH_PAUSE));
        steps.push(Step::Abort);
    }
    let body = futures::stream::unfold(steps.into_iter(), |mut steps| async move {
        match steps.next()? {
            Step::Send(bytes) => Some((Ok(bytes), steps)),
            Step::Pause(pause) => {
                tokio::time::sleep(pause).await;
                Some((Ok(Bytes::new()), steps))
            }
            Step::Abort => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "reprise-testkit: scripted cut",
                )),
                steps,
            )),
        }
    });
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&rendered.content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    for (name, value) in &reply.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    response
}
