"""Images the Docker tests derive from the local simulator image."""

from __future__ import annotations

import io
import uuid
from typing import Any


def build_with_script(client: Any, base: str, name: str, path: str, script: str) -> str:
    """An image derived from `base` with `script` as the executable `path` (a fake
    nvidia-smi); the caller removes the returned tag."""
    tag = f"pytest-llmperf/{name}:{uuid.uuid4().hex[:8]}"
    quoted = script.replace("\\", "\\\\").replace("\n", "\\n").replace("'", "'\\''")
    dockerfile = f"FROM {base}\nRUN printf '{quoted}' > {path} && chmod +x {path}\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False)
    return tag
