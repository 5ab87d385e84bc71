package dev.krabka;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.AlterConfigsRequest;
import org.apache.kafka.common.requests.AlterConfigsResponse;
import org.apache.kafka.common.requests.ApiError;
import org.apache.kafka.common.requests.ApiVersionsRequest;
import org.apache.kafka.common.requests.ApiVersionsResponse;
import org.apache.kafka.common.requests.RequestHeader;

/**
 * The legacy AlterConfigs request (API key 33), which Kafka 4's Admin client no longer exposes
 * (Admin#alterConfigs was removed in 4.0) but brokers still serve. Sent on a plain socket with
 * kafka-clients' own request and response classes: ApiVersions first to pick the version.
 */
final class LegacyAlterConfigs {
    private static final String CLIENT_ID = "client-check-admin-legacy";
    private static final int TIMEOUT_MS = 30_000;

    private LegacyAlterConfigs() {}

    /** Replaces every override of res with entries; returns the version used. */
    static short alter(Node node, ConfigResource res, Map<String, String> entries) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(node.host(), node.port()), TIMEOUT_MS);
            s.setSoTimeout(TIMEOUT_MS);
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            DataInputStream in = new DataInputStream(s.getInputStream());

            short apiVersionsVersion = ApiKeys.API_VERSIONS.latestVersion();
            ApiVersionsResponse versions = (ApiVersionsResponse) roundTrip(out, in,
                    new ApiVersionsRequest.Builder().build(apiVersionsVersion), 1);
            ApiVersionsResponseData.ApiVersion range = versions.apiVersion(ApiKeys.ALTER_CONFIGS.id);
            if (range == null) {
                throw new CheckFailed("ApiVersions: the broker does not list AlterConfigs (key "
                        + ApiKeys.ALTER_CONFIGS.id + ")");
            }
            short version = (short) Math.min(range.maxVersion(), ApiKeys.ALTER_CONFIGS.latestVersion());

            List<AlterConfigsRequest.ConfigEntry> list = new ArrayList<>();
            entries.forEach((k, v) -> list.add(new AlterConfigsRequest.ConfigEntry(k, v)));
            AlterConfigsRequest req = new AlterConfigsRequest.Builder(
                    Map.of(res, new AlterConfigsRequest.Config(list)), false).build(version);
            AlterConfigsResponse resp = (AlterConfigsResponse) roundTrip(out, in, req, 2);
            ApiError err = resp.errors().get(res);
            if (err == null) {
                throw new CheckFailed("AlterConfigs v" + version + ": no result for " + res + " in " + resp.errors());
            }
            if (err.isFailure()) {
                throw new CheckFailed("AlterConfigs v" + version + " " + res + ": " + err.error() + ": "
                        + err.messageWithFallback());
            }
            return version;
        }
    }

    private static AbstractResponse roundTrip(DataOutputStream out, DataInputStream in, AbstractRequest req,
            int correlationId) throws IOException {
        RequestHeader header = new RequestHeader(req.apiKey(), req.version(), CLIENT_ID, correlationId);
        ByteBuffer frame = req.serializeWithHeader(header);
        byte[] bytes = new byte[frame.remaining()];
        frame.get(bytes);
        out.writeInt(bytes.length);
        out.write(bytes);
        out.flush();
        int size = in.readInt();
        if (size < 0 || size > 64 << 20) {
            throw new CheckFailed(req.apiKey() + " v" + req.version() + ": bad response size " + size);
        }
        byte[] body = new byte[size];
        in.readFully(body);
        return AbstractResponse.parseResponse(ByteBuffer.wrap(body), header);
    }
}
