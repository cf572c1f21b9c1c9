"""A stand-in OpenAI-compatible server that misbehaves the same way on every request."""
import http.server
import threading


class CannedServer:
    """A real HTTP server on 127.0.0.1 that answers every POST with HTTP 200 and a fixed body."""

    def __init__(self, body: bytes, content_type: str = "application/json"):
        bodies = self.bodies = []  # every request body received, in order

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                bodies.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.posts = 0
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
