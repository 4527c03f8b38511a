"""Kafka wire framing over kio: headers, size-prefixed frames, an asyncio server and client."""
