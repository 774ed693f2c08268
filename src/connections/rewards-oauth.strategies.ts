import { PassportStrategy } from '@nestjs/passport';
import { Strategy } from 'passport-oauth2';
import type { RewardsEnvironment, RewardsEnvironmentConfig } from '../config/app-config';
import type { PgStateStore } from './oauth-state.store';

/** What the strategies hand to the callback: the raw token response (never logged). */
export interface OAuthResult {
  accessToken: string;
  refreshToken: string | undefined;
  params: Record<string, unknown>;
}

export const strategyName = (env: RewardsEnvironment) => `rewards-${env}`;

/**
 * passport-oauth2 for one environment's host, registered with passport as `rewards-<environment>` when built. The
 * redirect URI is byte-identical on the authorization and the token request.
 */
export function oauthStrategy(
  name: RewardsEnvironment,
  publicBaseUrl: string,
  env: RewardsEnvironmentConfig,
  store: PgStateStore,
) {
  class RewardsOAuthStrategy extends PassportStrategy(Strategy, strategyName(name), 5) {
    validate(accessToken: string, refreshToken: string, params: Record<string, unknown>): OAuthResult {
      return { accessToken, refreshToken: refreshToken || undefined, params };
    }
  }
  return new RewardsOAuthStrategy({
    authorizationURL: `${env.baseUrl}/oauth/authorize`,
    tokenURL: `${env.baseUrl}/oauth/token`,
    clientID: env.clientId,
    clientSecret: env.clientSecret,
    callbackURL: `${publicBaseUrl}/oauth/callback`,
    scopeSeparator: ' ',
    pkce: env.pkce ? 'S256' : false,
    store,
    skipUserProfile: true,
  } as unknown as ConstructorParameters<typeof Strategy>[0]);
}
