"""Images the Docker tests derive from the local simulator image, and the small ShareGPT
file their plugin projects read."""

from __future__ import annotations

import io
import json
import random
import uuid
from pathlib import Path
from typing import Any


def build_with_script(client: Any, base: str, name: str, path: str, script: str) -> str:
    """An image derived from `base` with `script` as the executable `path` (a fake
    nvidia-smi); the caller removes the returned tag."""
    tag = f"pytest-llmperf/{name}:{uuid.uuid4().hex[:8]}"
    quoted = script.replace("\\", "\\\\").replace("\n", "\\n").replace("'", "'\\''")
    dockerfile = f"FROM {base}\nRUN printf '{quoted}' > {path} && chmod +x {path}\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False)
    return tag


def write_tiny_sharegpt(path: Path) -> None:
    """40 ShareGPT conversations of a few words (seeded), for a plugin project's
    `llmperf_dataset`: enough prompts for a small suite, fast to tokenize."""
    rng = random.Random(3)
    words = "alpha beta gamma delta model token cache server stream prompt answer".split()
    data = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": " ".join(rng.choice(words) for _ in range(rng.randint(10, 30)))},
                {"from": "gpt", "value": " ".join(rng.choice(words) for _ in range(rng.randint(20, 60)))},
            ],
        }
        for i in range(40)
    ]
    path.write_text(json.dumps(data))
