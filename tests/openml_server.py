"""A local stand-in for OpenML's REST API, bound to 127.0.0.1, for the download tests.

It answers the requests openml-python 0.15 makes for ``get_task(..., download_splits=True,
download_data=True, download_qualities=True, download_features_meta_data=True)``:

    GET /api/v1/xml/task/<id>                  task.xml (its data_splits_url points here)
    GET /api/v1/xml/data/<id>                  description.xml (its oml:url points here)
    GET /api/v1/xml/data/features/<id>         features.xml
    GET /api/v1/xml/data/qualities/<id>        qualities.xml
    GET <path of data_splits_url>, <path of oml:url>   the splits and the data (ARFF)

Anything else is OpenML's error answer (HTTP 412 with an <oml:error> body, code 151 or 111).
Bodies are gzip-compressed as OpenML's are. The files come from small fixture tasks built
here (:func:`fixture_task`) or from an openml cache on disk (:func:`tasks_from_cache`).
Faults are scheduled per path: an HTTP 5xx answer, a stall longer than the client's
timeout, a body cut short, or a hang until :meth:`OpenMLServer.release` (to kill a client
mid-transfer).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

BASE = "{BASE}"  # placeholder for http://127.0.0.1:<port> in the served documents
ERROR = '<oml:error xmlns:oml="http://openml.org/openml"><oml:code>{code}</oml:code><oml:message>{message}</oml:message></oml:error>'
_URL = re.compile(r"(<oml:(?:data_splits_url|url)>)https?://[^/<]+")


@dataclass
class FixtureTask:
    task_id: int
    dataset_id: int
    name: str
    documents: dict[str, str]  # URL path -> body ({BASE} stands for the server's address)
    rows: int
    features: int
    classes: int


def _features_xml(attributes: list[tuple[str, object]], target: str) -> str:
    parts = ['<oml:data_features xmlns:oml="http://openml.org/openml">']
    for index, (name, kind) in enumerate(attributes):
        nominal = isinstance(kind, list)
        values = "".join(f"<oml:nominal_value>{v}</oml:nominal_value>" for v in kind) if nominal else ""
        parts.append(
            f"<oml:feature><oml:index>{index}</oml:index><oml:name>{name}</oml:name>"
            f"<oml:data_type>{'nominal' if nominal else 'numeric'}</oml:data_type>{values}"
            f"<oml:is_target>{str(name == target).lower()}</oml:is_target><oml:is_ignore>false</oml:is_ignore>"
            "<oml:is_row_identifier>false</oml:is_row_identifier></oml:feature>"
        )
    return "".join(parts) + "</oml:data_features>"


def _task_xml(task_id: int, dataset_id: int, target: str, n_folds: int) -> str:
    return (
        '<oml:task xmlns:oml="http://openml.org/openml">'
        f"<oml:task_id>{task_id}</oml:task_id><oml:task_type_id>1</oml:task_type_id>"
        "<oml:task_type>Supervised Classification</oml:task_type>"
        f'<oml:input name="source_data"><oml:data_set><oml:data_set_id>{dataset_id}</oml:data_set_id>'
        f"<oml:target_feature>{target}</oml:target_feature></oml:data_set></oml:input>"
        '<oml:input name="estimation_procedure"><oml:estimation_procedure><oml:id>1</oml:id>'
        "<oml:type>crossvalidation</oml:type>"
        f"<oml:data_splits_url>{BASE}/api_splits/get/{task_id}/Task_{task_id}_splits.arff</oml:data_splits_url>"
        '<oml:parameter name="number_repeats">1</oml:parameter>'
        f'<oml:parameter name="number_folds">{n_folds}</oml:parameter>'
        '<oml:parameter name="percentage"></oml:parameter><oml:parameter name="stratified_sampling">true</oml:parameter>'
        "</oml:estimation_procedure></oml:input>"
        '<oml:input name="evaluation_measures"><oml:evaluation_measures><oml:evaluation_measure>predictive_accuracy'
        "</oml:evaluation_measure></oml:evaluation_measures></oml:input></oml:task>"
    )


def fixture_task(task_id: int, dataset_id: int, n_rows: int = 120, n_classes: int = 3, seed: int = 0) -> FixtureTask:
    """A seeded classification task: 3 numeric features (a few missing), one nominal feature,
    a nominal target with ``n_classes`` classes, 10 folds (every row tested once)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n_rows) % n_classes
    rng.shuffle(labels)
    numeric = rng.normal(size=(n_rows, 3)) + labels[:, None]
    colours = ["red", "green", "blue"]
    classes = [f"c{k}" for k in range(n_classes)]
    attributes = [("x0", "REAL"), ("x1", "REAL"), ("x2", "REAL"), ("colour", colours), ("class", classes)]
    lines = [f"@RELATION fixture-{dataset_id}", ""]
    lines += [f"@ATTRIBUTE {name} {'{' + ','.join(kind) + '}' if isinstance(kind, list) else kind}" for name, kind in attributes]
    lines += ["", "@DATA"]
    for row in range(n_rows):
        values = ["?" if rng.random() < 0.03 else f"{v:.6g}" for v in numeric[row]]
        lines.append(",".join([*values, colours[int(rng.integers(3))], classes[labels[row]]]))
    data = "\n".join(lines) + "\n"
    folds = rng.permutation(n_rows) % 10
    splits = ["@RELATION Task_%d_splits" % task_id, "", "@ATTRIBUTE type {TRAIN,TEST}", "@ATTRIBUTE rowid NUMERIC",
              "@ATTRIBUTE repeat NUMERIC", "@ATTRIBUTE fold NUMERIC", "", "@DATA"]
    for fold in range(10):
        splits += [f"{'TEST' if folds[row] == fold else 'TRAIN'},{row},0,{fold}" for row in range(n_rows)]
    name = f"fixture-{dataset_id}"
    description = (
        '<oml:data_set_description xmlns:oml="http://openml.org/openml">'
        f"<oml:id>{dataset_id}</oml:id><oml:name>{name}</oml:name><oml:version>1</oml:version>"
        "<oml:description>A seeded test dataset.</oml:description><oml:format>ARFF</oml:format>"
        f"<oml:url>{BASE}/data/v1/download/{dataset_id}/{name}.arff</oml:url><oml:file_id>{dataset_id}</oml:file_id>"
        "<oml:default_target_attribute>class</oml:default_target_attribute><oml:visibility>public</oml:visibility>"
        "<oml:status>active</oml:status>"
        f"<oml:md5_checksum>{hashlib.md5(data.encode()).hexdigest()}</oml:md5_checksum>"
        "</oml:data_set_description>"
    )
    qualities = '<oml:data_qualities xmlns:oml="http://openml.org/openml">' + "".join(
        f"<oml:quality><oml:name>{q}</oml:name><oml:value>{v:.1f}</oml:value></oml:quality>"
        for q, v in (("NumberOfInstances", n_rows), ("NumberOfFeatures", 5), ("NumberOfClasses", n_classes))
    ) + "</oml:data_qualities>"
    documents = {
        f"/api/v1/xml/task/{task_id}": _task_xml(task_id, dataset_id, "class", 10),
        f"/api/v1/xml/data/{dataset_id}": description,
        f"/api/v1/xml/data/features/{dataset_id}": _features_xml(attributes, "class"),
        f"/api/v1/xml/data/qualities/{dataset_id}": qualities,
        f"/api_splits/get/{task_id}/Task_{task_id}_splits.arff": "\n".join(splits) + "\n",
        f"/data/v1/download/{dataset_id}/{name}.arff": data,
    }
    return FixtureTask(task_id, dataset_id, name, documents, n_rows, 4, n_classes)


def tasks_from_cache(cache: str | Path, task_ids) -> dict[str, str]:
    """The documents of ``task_ids`` in an openml cache (read only), with their URLs pointing here."""
    root = Path(cache) / "org" / "openml" / "www"
    documents = {}
    for task_id in task_ids:
        task_xml = (root / f"tasks/{task_id}/task.xml").read_text()
        dataset_id = int(re.search(r"<oml:data_set_id>(\d+)<", task_xml).group(1))
        folder = root / f"datasets/{dataset_id}"
        description = (folder / "description.xml").read_text()
        splits_path = re.search(r"<oml:data_splits_url>https?://[^/<]+([^<]+)<", task_xml).group(1)
        data_path = re.search(r"<oml:url>https?://[^/<]+([^<]+)<", description).group(1)
        documents.update({
            f"/api/v1/xml/task/{task_id}": _URL.sub(r"\1" + BASE, task_xml),
            f"/api/v1/xml/data/{dataset_id}": _URL.sub(r"\1" + BASE, description),
            f"/api/v1/xml/data/features/{dataset_id}": (folder / "features.xml").read_text(),
            f"/api/v1/xml/data/qualities/{dataset_id}": (folder / "qualities.xml").read_text(),
            splits_path: (root / f"tasks/{task_id}/datasplits.arff").read_text(),
            data_path: (folder / "dataset.arff").read_text(),
        })
    return documents


@dataclass
class Fault:
    kind: str  # "status" (HTTP `status`), "stall" (wait `seconds`, then answer), "truncate", "hang"
    status: int = 503
    seconds: float = 0.0


@dataclass
class OpenMLServer:
    """``with OpenMLServer(documents) as server:`` serves ``documents`` at ``server.url``
    (the API base URL to give openml); ``server.requests`` lists the paths asked for."""

    documents: dict[str, str]
    requests: list[str] = field(default_factory=list)
    faults: dict[str, list[Fault]] = field(default_factory=dict)  # path substring -> faults, used in order
    _released: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, path_part: str, *faults: Fault) -> None:
        """The next requests whose path contains ``path_part`` meet ``faults``, one each."""
        with self._lock:
            self.faults.setdefault(path_part, []).extend(faults)

    def release(self) -> None:
        """Let hanging requests finish (and no later request hang)."""
        self._released.set()

    def asked(self, path_part: str) -> int:
        with self._lock:
            return sum(path_part in path for path in self.requests)

    def _next_fault(self, path: str) -> Fault | None:
        with self._lock:
            self.requests.append(path)
            for part, queue in self.faults.items():
                if part in path and queue:
                    return queue.pop(0)
        return None

    def __enter__(self) -> OpenMLServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes, cut: bool = False) -> None:
                gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
                payload = gzip.compress(body, mtime=0) if gzipped else body
                self.send_response(status)
                self.send_header("Content-Type", "text/xml; charset=utf-8")
                if gzipped:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2] if cut else payload)

            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                path = self.path.split("?", 1)[0]
                fault = server._next_fault(path)
                if fault is not None and fault.kind == "status":
                    return self._send(fault.status, b"<html><body>Service Unavailable</body></html>")
                if fault is not None and fault.kind == "stall":
                    time.sleep(fault.seconds)
                if fault is not None and fault.kind == "hang":
                    server._released.wait()
                body = server.documents.get(path)
                if body is None:
                    code, message = (151, "Unknown task") if "/task/" in path else (111, "Unknown dataset")
                    return self._send(412, ERROR.format(code=code, message=message).encode())
                try:
                    self._send(200, body.replace(BASE, server.base).encode(), cut=fault is not None and fault.kind == "truncate")
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.base = f"http://127.0.0.1:{self._http.server_address[1]}"
        self.url = f"{self.base}/api/v1/xml"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        self._http.shutdown()
        self._http.server_close()
