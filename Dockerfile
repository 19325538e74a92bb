# The evalstream image: the CLI (worker, topics, up, check, …) with the bundled examples.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY assertions ./assertions
COPY connectors ./connectors
COPY stream ./stream
COPY examples ./examples
RUN pip install --no-cache-dir . && useradd --create-home evalstream
USER evalstream
ENTRYPOINT ["evalstream"]
CMD ["--help"]
