// Loads the project's .proto files (the contract, proto/cachewatch/v1) at
// runtime; there is no second copy of them in this package.
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** proto/ at the repository root, seen from dist/src/. */
export const DEFAULT_PROTO_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'proto');

/**
 * The shape of messages: field names as in the .proto files (snake_case),
 * enums as their names, 64-bit integers as decimal strings.
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

export function loadPackageDefinition(protoDir: string = DEFAULT_PROTO_DIR): protoLoader.PackageDefinition {
  return protoLoader.loadSync(
    ['cachewatch/v1/service.proto'],
    { ...LOADER_OPTIONS, includeDirs: [protoDir] },
  );
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type CacheWatchClientCtor = new (address: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => any;

export function loadCacheWatchService(protoDir?: string): CacheWatchClientCtor {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const pkg = grpc.loadPackageDefinition(loadPackageDefinition(protoDir)) as any;
  return pkg.cachewatch.v1.CacheWatch as CacheWatchClientCtor;
}
