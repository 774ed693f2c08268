import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Controller, Get, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import type { RewardsConfig } from '../config/app-config';
import { InjectConfig } from '../config/config.module';
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

  constructor(
    @InjectConfig('publicBaseUrl') private readonly publicBaseUrl: string,
    @InjectConfig('mountSandbox') mountSandbox: boolean,
    @InjectConfig('rewards') rewards: RewardsConfig,
    @InjectConfig('dataDir') dataDir: string,
    @InjectConfig('operatorApiKey') operatorApiKey: string,
  ) {
    // Only on a local demo gateway (the built-in sandbox, no production environment): the start page is public.
    const demo = mountSandbox && !rewards.production;
    this.page = homePage(publicBaseUrl, demo ? generatedKeyFile(dataDir, operatorApiKey) : undefined);
  }

  @Get()
  @Public()
  home(@Req() req: Request, @Res() res: Response): void {
    res.vary('Accept');
    if (req.accepts(['html', 'json']) === 'json') {
      res.json(homeLinks(this.publicBaseUrl));
      return;
    }
    res.type('html').send(this.page);
  }
}

/** Where the operator key is kept, as the start-up banner shows it, when it was generated into DATA_DIR. */
function generatedKeyFile(dataDir: string, operatorApiKey: string): string | undefined {
  const file = path.join(dataDir, 'operator-api-key');
  try {
    return readFileSync(file, 'utf8').trim() === operatorApiKey ? file : undefined;
  } catch {
    return undefined;
  }
}
