"""Kafka wire framing over kio: headers, size-prefixed frames, an asyncio server and client.

Modules (each with one job):

- ``framing``   int32 size-prefixed frames; ``DEFAULT_MAX_FRAME_BYTES`` = Kafka's socket.request.max.bytes.
- ``bounds``    a schema walk that bounds every length/count before kio's native decoder runs (kio
                aborts the process on a hostile array count otherwise).
- ``codec``     ``decode_entity``/``decode_exact``/``encode_entity``: safe single-entity codec.
- ``headers``   request header v1/v2, response header v0/v1 (ApiVersions always v0), whole messages.
- ``api_versions`` ApiVersions answers (incl. UNSUPPORTED_VERSION → v0 body) and ``pick_version``.
- ``served``    the version ranges a controller and a broker advertise, by API (the process registers
                its handlers with them; the simulators' clients draw versions from them).
- ``registry``  ``ApiRegistry``: handlers by api key and version range; ``Handler``, ``RequestContext``.
- ``server``    ``ProtocolServer``: dispatch, in-order responses, close-with-logged-reason on bad frames.
- ``client``    ``ProtocolClient``: correlation ids, pipelining, per-request timeout, reconnect.
- ``negotiate`` ``fetch_api_versions``/``negotiate``: the highest version both sides serve.
- ``local``     ``RequestSender`` (the client seam) and ``LocalSender`` (in-memory, for tests).
- ``errors``    every exception; client errors say whether the request may have taken effect:
                ``RequestNotSent`` (ConnectFailed, ClientClosed, InvalidRequest) → did not (Jepsen
                ``fail``); ``RequestOutcomeUnknown`` (RequestTimedOut, ConnectionLost) → may have
                (Jepsen ``info``). ``RequestError.definite`` is the same as a boolean.

Serving::

    registry = ApiRegistry()
    registry.register(55, 0, 2, describe_quorum)        # sync or async; returns the response entity
    async with ProtocolServer(registry, "0.0.0.0", 9093, listener="CONTROLLER"):
        ...

Calling::

    async with ProtocolClient("10.0.0.2", 9093, request_timeout=2.0) as client:
        versions = await negotiate(client, {55: (0, 2)})
        response = await client.send(DescribeQuorumRequest(...))   # the version is the entity class's
"""
