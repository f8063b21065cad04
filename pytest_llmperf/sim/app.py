"""The simulator's vLLM OpenAI-compatible routes on Starlette, with bodies, errors and
status codes as real vLLM 0.32 captures have them (tests/fixtures/reference/)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pytest_llmperf.sim import tokenizer
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.generation import VLLM_VERSION, Generation
from pytest_llmperf.sim.metrics import CONTENT_TYPE
from pytest_llmperf.sim.params import ApiError, chat_text, check_model, json_body, validation_error
from pytest_llmperf.sim.service import EngineService


def build_app(config: SimConfig) -> Starlette:
    service = EngineService(config)
    info, generation = _Endpoints(service), Generation(service)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    routes = [
        Route("/health", info.health, methods=["GET"]),
        Route("/version", info.version, methods=["GET"]),
        Route("/v1/models", info.models, methods=["GET"]),
        Route("/metrics", info.metrics, methods=["GET"]),
        Route("/tokenize", info.tokenize, methods=["POST"]),
        Route("/v1/completions", generation.completions, methods=["POST"]),
        Route("/v1/chat/completions", generation.chat_completions, methods=["POST"]),
        Route("/sim/requests", info.sim_requests, methods=["GET", "DELETE"]),
        Route("/sim/state", info.sim_state, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _not_found})
    app.state.service = service
    return app


async def _not_found(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # registered for HTTPException only
        raise exc
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)


class _Endpoints:
    """The routes that generate nothing: health, version, models, metrics, tokenize, and
    the simulator's own /sim/ pages (its request log and its state)."""

    def __init__(self, service: EngineService) -> None:
        self.service, self.config = service, service.config
        self.created = int(time.time())

    async def health(self, request: Request) -> Response:
        ok = not self.service.dead and not self.service.starting
        return Response(status_code=200 if ok else 503)

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": VLLM_VERSION})

    async def models(self, request: Request) -> Response:
        perm = {
            "id": f"modelperm-{uuid.uuid4().hex[:16]}",
            "object": "model_permission",
            "created": self.created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        card = {
            "id": self.config.model_id,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": self.config.model,
            "parent": None,
            "max_model_len": self.config.max_model_len,
            "permission": [perm],
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def metrics(self, request: Request) -> Response:
        return Response(self.service.metrics.render(), media_type=CONTENT_TYPE)

    async def tokenize(self, request: Request) -> Response:
        if self.config.no_tokenize:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        try:
            body = await json_body(request)
            check_model(body, self.config.model_id)
            if "messages" in body:
                text = chat_text(body["messages"])
            elif isinstance(body.get("prompt"), str):
                text = body["prompt"]
            else:
                raise validation_error("missing", ("body", "prompt"), "Field required", body)
        except ApiError as exc:
            return exc.response()
        tokens = tokenizer.encode(text, self.config.prompt_word_tokens)
        limit = self.config.max_model_len
        return JSONResponse({"count": len(tokens), "max_model_len": limit, "tokens": tokens, "token_strs": None})

    async def sim_requests(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.service.request_log.clear()
            return JSONResponse({"cleared": True})
        return JSONResponse(list(self.service.request_log))

    async def sim_state(self, request: Request) -> Response:
        service, e = self.service, self.service.engine
        return JSONResponse(
            {
                "pid": os.getpid(),
                "dead": service.dead,
                "received": service.received,
                "running": len(e.running),
                "waiting": len(e.waiting),
                "max_lag_s": service.max_lag,
                "profile": e.profile.name,
                "speed": self.config.speed,
                "num_speculative_tokens": e.k,
                "acceptance": list(e.survival),
                "run_factors": {"step_time": e.run_factors[0], "acceptance": e.run_factors[1]},
            }
        )
