import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/app-config';
import { Public } from '../tenants/auth/auth.decorators';
import { homeLinks, homePage } from './home.page';

/**
 * `GET /`: a small start page for a browser (links to /docs, /ops, readiness and the quick start), or
 * `{name, docs, ops, health}` when the client asks for JSON (`Accept: application/json`).
 */
@ApiExcludeController()
@Controller()
export class HomeController {
  private readonly page: string;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {
    this.page = homePage(config.publicBaseUrl, demoOperatorKeyFile(config));
  }

  @Get()
  @Public()
  home(@Req() req: Request, @Res() res: Response): void {
    res.vary('Accept');
    if (req.accepts(['html', 'json']) === 'json') {
      res.json(homeLinks(this.config.publicBaseUrl));
      return;
    }
    res.type('html').send(this.page);
  }
}

/**
 * Where the operator key is kept, as the start-up banner shows it — only on a local demo gateway (the built-in sandbox,
 * no production environment) whose key was generated into DATA_DIR: the start page is public.
 */
function demoOperatorKeyFile(config: AppConfig): string | undefined {
  if (!config.mountSandbox || config.rewards.production) return undefined;
  const file = path.join(config.dataDir, 'operator-api-key');
  try {
    return readFileSync(file, 'utf8').trim() === config.operatorApiKey ? file : undefined;
  } catch {
    return undefined;
  }
}
