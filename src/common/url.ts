import {
  type ValidationArguments,
  ValidatorConstraint,
  type ValidatorConstraintInterface,
} from 'class-validator';

/** An absolute http(s) URL that WHATWG `new URL()` accepts — what the callback will later redirect a browser to. */
export function isBrowserUrl(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * class-validator's IsUrl accepts some hosts that `new URL()` refuses (e.g. `http://xn--a`, an invalid punycode
 * label); such a value would be stored, then fail in the OAuth callback. Checked at the door instead.
 */
@ValidatorConstraint({ name: 'browserUrl' })
export class BrowserUrl implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return isBrowserUrl(value);
  }
  defaultMessage(args: ValidationArguments): string {
    return `${args.property} must be absolute http(s) URLs a browser can be sent to`;
  }
}
