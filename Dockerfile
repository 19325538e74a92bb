# The evalstream image: the CLI (worker, topics, up, check, …) with the bundled examples.
#
# Build stage: the pure-Python wheel (py3-none-any).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY evalstream ./evalstream
RUN pip wheel --no-cache-dir --no-deps -w /wheels .

FROM python:3.11-slim
WORKDIR /app
COPY --from=build /wheels /wheels
COPY examples ./examples
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels && useradd --create-home evalstream
USER evalstream
ENTRYPOINT ["evalstream"]
CMD ["--help"]
