import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { Strategy } from 'passport-oauth2';
import type { RewardsEnvironment, RewardsEnvironmentConfig } from '../config/app-config';
import { PgStateStore } from './oauth-state.store';

/** What the strategies hand to the callback: the raw token response (never logged). */
export interface OAuthResult {
  accessToken: string;
  refreshToken: string | undefined;
  params: Record<string, unknown>;
}

export const strategyName = (env: RewardsEnvironment) => `rewards-${env}`;

/** The redirect URI, byte-identical on the authorization request and the token request. */
export const callbackUrl = (publicBaseUrl: string) => `${publicBaseUrl}/oauth/callback`;

function options(publicBaseUrl: string, env: RewardsEnvironmentConfig, store: PgStateStore) {
  return {
    authorizationURL: `${env.baseUrl}/oauth/authorize`,
    tokenURL: `${env.baseUrl}/oauth/token`,
    clientID: env.clientId,
    clientSecret: env.clientSecret,
    callbackURL: callbackUrl(publicBaseUrl),
    scopeSeparator: ' ',
    pkce: env.pkce ? ('S256' as const) : false,
    store,
    skipUserProfile: true,
  } as unknown as ConstructorParameters<typeof Strategy>[0];
}

const verify = (accessToken: string, refreshToken: string, params: Record<string, unknown>): OAuthResult => ({
  accessToken,
  refreshToken: refreshToken || undefined,
  params,
});

/** passport-oauth2 for the sandbox host; registered with passport under `rewards-sandbox`. */
@Injectable()
export class SandboxOAuthStrategy extends PassportStrategy(Strategy, strategyName('sandbox'), 5) {
  constructor(publicBaseUrl: string, env: RewardsEnvironmentConfig, states: PgStateStore) {
    super(options(publicBaseUrl, env, states));
  }
  validate(accessToken: string, refreshToken: string, params: Record<string, unknown>): OAuthResult {
    return verify(accessToken, refreshToken, params);
  }
}

/** passport-oauth2 for the production host; registered under `rewards-production` when it is configured. */
@Injectable()
export class ProductionOAuthStrategy extends PassportStrategy(Strategy, strategyName('production'), 5) {
  constructor(publicBaseUrl: string, env: RewardsEnvironmentConfig, states: PgStateStore) {
    super(options(publicBaseUrl, env, states));
  }
  validate(accessToken: string, refreshToken: string, params: Record<string, unknown>): OAuthResult {
    return verify(accessToken, refreshToken, params);
  }
}
