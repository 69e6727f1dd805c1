"""The scaler's listening rules: loopback by default, TLS as an option, and callers
authenticated by client certificates before it may listen beyond loopback."""

import asyncio
import datetime
import ipaddress

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from streamtrain.errors import ConfigError
from streamtrain.keda.plans import PlanBook
from streamtrain.keda.server import ScalerSettings, _credentials, is_loopback
from streamtrain.keda.service import ScalerService
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.proto import externalscaler_pb2 as es
from streamtrain.proto.externalscaler_pb2_grpc import (
    ExternalScalerStub,
    add_ExternalScalerServicer_to_server,
)

ANY = "0.0.0.0"  # noqa: S104 - the address the rules are about; nothing binds it here


@pytest.mark.parametrize(
    "host,loopback",
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        (ANY, False),
        ("10.1.2.3", False),
    ],
)
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_defaults_listen_on_loopback_without_tls():
    settings = ScalerSettings()
    assert (settings.host, settings.tls) == ("127.0.0.1", False)


def test_beyond_loopback_needs_client_certificates(tmp_path):
    with pytest.raises(ConfigError, match=r"beyond loopback.*--tls-client-ca"):
        ScalerSettings(host=ANY)
    pem = tmp_path / "x.pem"
    pem.write_text("x")
    with pytest.raises(ConfigError, match="beyond loopback"):
        ScalerSettings(host=ANY, tls_cert=pem, tls_key=pem)
    ScalerSettings(host=ANY, tls_cert=pem, tls_key=pem, tls_client_ca=pem)


def test_tls_options_must_come_together(tmp_path):
    pem = tmp_path / "x.pem"
    pem.write_text("x")
    with pytest.raises(ConfigError, match="both --tls-cert and --tls-key"):
        ScalerSettings(tls_cert=pem)
    with pytest.raises(ConfigError, match="needs --tls-cert"):
        ScalerSettings(tls_client_ca=pem)
    with pytest.raises(ConfigError, match="does not exist"):
        ScalerSettings(tls_cert=pem, tls_key=tmp_path / "missing.pem")


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject, key, issuer=None, issuer_key=None, ca=False):
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(issuer_key or key, hashes.SHA256())


def _pem(obj):
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.fixture
def pki(tmp_path):
    ca_key = _key()
    ca = _cert("streamtrain-test-ca", ca_key, ca=True)
    files = {"ca": _pem(ca)}
    for who in ("server", "keda"):
        key = _key()
        files[f"{who}.crt"] = _pem(_cert(who, key, ca, ca_key))
        files[f"{who}.key"] = _pem(key)
    stranger_key = _key()
    files["stranger.crt"] = _pem(_cert("stranger", stranger_key))
    files["stranger.key"] = _pem(stranger_key)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


def test_mutual_tls_admits_keda_and_refuses_a_client_without_a_ca_signed_certificate(pki):
    settings = ScalerSettings(
        host=ANY,
        port=0,
        tls_cert=pki / "server.crt",
        tls_key=pki / "server.key",
        tls_client_ca=pki / "ca",
    )
    book = PlanBook()
    book.add_command(cp.ScaleCommand(job="ctr", command_id="c", target_workers=3))

    port = 0

    async def call(cert, key):
        creds = grpc.ssl_channel_credentials(
            root_certificates=(pki / "ca").read_bytes(),
            private_key=(pki / key).read_bytes() if key else None,
            certificate_chain=(pki / cert).read_bytes() if cert else None,
        )
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds) as channel:
            stub = ExternalScalerStub(channel)
            return await stub.IsActive(es.ScaledObjectRef(scalerMetadata={"job": "ctr"}), timeout=5)

    async def scenario():
        nonlocal port
        server = grpc.aio.server()
        add_ExternalScalerServicer_to_server(ScalerService(book, lambda: True, str), server)
        port = server.add_secure_port("127.0.0.1:0", _credentials(settings))
        await server.start()
        try:
            admitted = await call("keda.crt", "keda.key")
            refused = []
            for cert, key in (("stranger.crt", "stranger.key"), (None, None)):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await call(cert, key)
                refused.append(info.value.code())
            return admitted, refused
        finally:
            await server.stop(None)

    admitted, refused = asyncio.run(scenario())
    assert admitted.result is True
    assert refused == [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
