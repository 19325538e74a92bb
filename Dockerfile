# The evalstream image: the CLI (worker, topics, up, check, …) with the bundled examples.
#
# Build stage: the hot-path modules compiled with mypyc (assertions/native.py) into the wheel.
# mypyc type-checks what it compiles, so this stage installs the dev extras (mypy, stubs).
FROM python:3.11-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY assertions ./assertions
COPY connectors ./connectors
COPY stream ./stream
COPY scripts/build_native.py ./scripts/
RUN pip install --no-cache-dir -e '.[dev]' \
    && python scripts/build_native.py \
    && pip wheel --no-deps --no-build-isolation -w /wheels .

FROM python:3.11-slim
WORKDIR /app
COPY --from=build /wheels /wheels
COPY examples ./examples
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels && useradd --create-home evalstream
USER evalstream
ENTRYPOINT ["evalstream"]
CMD ["--help"]
